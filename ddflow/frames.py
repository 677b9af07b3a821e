"""DataFrame rows <-> update triples: the conversion, without Spark.

This module isolates how a table's rows become `(data, time, diff)` updates and
back, for every engine: `data` is a row's columns other than the time and diff ones
(one column: its value; several: a tuple in column order); the time and diff columns
are optional (defaults: the session's time, +1); a struct of two fields is a
`Product` time, and on the way out a `Product` becomes a pair (a struct), an int
stays an int, any other time its `repr`.  It leaves out where the rows are (the
Spark engine converts them on its executors, `ddflow.engine.spark_io`; the front door
streams them through the driver for any other engine) and checking the updates
(`ddflow.updates.checked_update`).  It imports no pyspark: it only calls methods of
the DataFrames and the session it is handed.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from lattice import Product
from ddflow.errors import DataError

#: The columns of a capture's updates, and of its accumulation at one time.
UPDATE_COLUMNS = ["data", "time", "diff"]
COUNT_COLUMNS = ["data", "count"]
#: Their types when there is no row to infer them from (Spark's DDL).
_EMPTY_SCHEMA = {False: "data string, time bigint, diff bigint",
                 True: "data string, count bigint"}


def columns_of(name: str, columns: Sequence[str], time: str | None, diff: str | None
               ) -> tuple[list[int], int | None, int | None]:
    """The positions of the data columns, the time column and the diff column (None
    when not given) among `columns`, or a `DataError` naming the input `name`.

    >>> columns_of("edges", ["src", "dst", "t"], "t", None)
    ([0, 1], 2, None)
    """
    for column in (time, diff):
        if column is not None and column not in columns:
            raise DataError(f"the DataFrame has no column {column!r} (columns: {columns})",
                            operator=name)
    data = [i for i, c in enumerate(columns) if c not in (time, diff)]
    if not data:
        raise DataError("the DataFrame has no data column besides time and diff",
                        operator=name)
    return (data, None if time is None else list(columns).index(time),
            None if diff is None else list(columns).index(diff))


def row_update(row: Any, data: list[int], time: int | None, diff: int | None,
               default_time: Any) -> tuple:
    """The update `(data, time, diff)` a row stands for (not checked).

    >>> row_update(("a", "b", (1, 0)), [0, 1], 2, None, 0)
    (('a', 'b'), Product(1, 0), 1)
    """
    values = [row[i] for i in data]
    return (values[0] if len(values) == 1 else tuple(values),
            default_time if time is None else time_of_value(row[time]),
            1 if diff is None else row[diff])


def time_of_value(value: Any) -> Any:
    """A time from a DataFrame value: an int as it is, a struct (a pair) as the
    `Product` of its two fields' times (anything else is left for the time check).

    >>> time_of_value(3), time_of_value((1, (2, 0)))
    (3, Product(1, Product(2, 0)))
    """
    if isinstance(value, tuple) and len(value) == 2:
        return Product(time_of_value(value[0]), time_of_value(value[1]))
    return value


def value_of_time(t: Any) -> Any:
    """The inverse for output: ints stay ints, a `Product` becomes a pair (a struct in
    the DataFrame), any other time its `repr`.

    >>> value_of_time(Product(1, Product(2, 0))), value_of_time(4)
    ((1, (2, 0)), 4)
    """
    if type(t) is int:
        return t
    if type(t) is Product:
        return (value_of_time(t[0]), value_of_time(t[1]))
    return repr(t)


def update_rows(updates: Iterable[tuple]) -> list[tuple]:
    """Updates as rows `(data, time value, diff)`."""
    return [(d, value_of_time(t), r) for d, t, r in updates]


def to_dataframe(spark: Any, rows: Any, accumulated: bool) -> Any:
    """`rows` (a list or an RDD) as a DataFrame of a capture's updates, or of its
    accumulation at one time (`accumulated`); typed columns when there is no row."""
    columns = COUNT_COLUMNS if accumulated else UPDATE_COLUMNS
    if isinstance(rows, list):
        if not rows:
            return spark.createDataFrame([], _EMPTY_SCHEMA[accumulated])
        return spark.createDataFrame(rows, columns)
    try:
        return spark.createDataFrame(rows, columns)
    except ValueError as exc:           # Spark cannot infer the types of an empty RDD
        if "empty" not in str(exc):
            raise
        return spark.createDataFrame([], _EMPTY_SCHEMA[accumulated])


def feed_rows(session: Any, frame: Any, time: str | None, diff: str | None) -> int:
    """Add every row of `frame` to `session` through the driver (`toLocalIterator`),
    all checked before any is kept (`InputSession.extend`); returns the count."""
    data, t, d = columns_of(session.name, frame.columns, time, diff)
    updates = [row_update(r, data, t, d, session.time) for r in frame.toLocalIterator()]
    session.extend(updates)
    return len(updates)


__all__ = ["columns_of", "feed_rows", "row_update", "time_of_value", "to_dataframe",
           "update_rows", "value_of_time"]
