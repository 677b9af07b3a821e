"""Starting Spark for ddflow and leaving nothing behind: the session, the executors'
environment, the checkpoint directory, temporary files.

Part of the Spark engine (pyspark is imported here only inside functions).  It
isolates what a Spark user configures or runs into before any dataflow work:

* `check_environment`: pyspark and Java present; a `spark://` master reachable *and*
  speaking Spark's RPC protocol (a port that answers but is something else fails
  at once, instead of SparkContext's three silent 20-second registration retries).
* `make_session`: a SparkSession with low-latency, loopback-friendly defaults that
  the caller's `conf` overrides (no timeout is fixed here: Spark's own network
  timeouts stay at Spark's defaults unless `conf` says otherwise), then a wait of at
  most `executor_timeout` seconds for an executor to register (`wait_for_executors`).
* `ExecutorSetup.prepare`: on the user's session or ours, the executors' Python (the
  driver's interpreter unless the user chose one), a probe that they import the
  project (shipping it as a zip when they cannot), and a typed error naming their
  interpreter when even that fails.
* `CheckpointDir`: the engine's own directory, under the user's `checkpoint_dir`
  (required for a cluster master: executors on other machines cannot read the
  driver's temp dir) or a temp dir for local masters; checked to be writable and,
  for a local path on a cluster, visible from the executors; removed by `stop()`.
* `Temporary`: paths an engine made, removed at `stop()` or at interpreter exit.
  (The project zip shipped to executors is not one: it belongs to the session, in
  Spark's own files directory, which Spark removes when the session stops.)

The engine's progress goes to the python logger `ddflow.spark` (see
`ddflow.engine.steplog`): configure it with `logging` as usual.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

from ddflow.errors import EngineUnavailableError, ExecutorEnvironmentError

log = logging.getLogger("ddflow.spark")


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`, `local-cluster[...]`: every
    executor on this machine, so a directory of the driver's is theirs too."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def is_in_process_master(master: str) -> bool:
    """`local` / `local[...]`: the executor is the driver JVM itself."""
    return master == "local" or master.startswith("local[")


# -- environment -------------------------------------------------------------------

def check_environment(master: str = "local[2]", timeout: float = 5.0) -> None:
    """Raise `EngineUnavailableError` with a remedy if Spark cannot start here."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailableError(
            "pyspark is not installed: `pip install pyspark` (or `pip install -e .`, "
            "which brings it)") from exc
    java_home = os.environ.get("JAVA_HOME")
    java = (Path(java_home) / "bin" / "java") if java_home else None
    if not (java and java.exists()) and shutil.which("java") is None:
        raise EngineUnavailableError(
            "Java was not found (no `java` on PATH, JAVA_HOME unset or wrong): install a "
            "Java 17 runtime (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME")
    if master.startswith("spark://"):
        for host, port in _master_addresses(master):
            what = spark_rpc_answer(host, port, timeout)
            if what is not None:
                raise EngineUnavailableError(
                    f"the Spark master {master} is unusable: {host}:{port} {what}. Start a "
                    "master there (`spark-class org.apache.spark.deploy.master.Master "
                    "--host 127.0.0.1`), or pass the address its log prints "
                    "('Starting Spark master at spark://...')")


def _master_addresses(master: str) -> list[tuple[str, int]]:
    """`spark://h1:p1,h2:p2` (standby masters) as `[(h1, p1), (h2, p2)]`."""
    out = []
    for part in master[len("spark://"):].split(","):
        host, _, port = part.rpartition(":") if ":" in part else (part, "", "7077")
        try:
            out.append((host.strip("[]"), int(port)))
        except ValueError:
            raise EngineUnavailableError(f"the master URL {master!r} has no valid port "
                                         f"in {part!r}") from None
    return out


def spark_rpc_answer(host: str, port: int, timeout: float) -> str | None:
    """None if a Spark RPC endpoint listens at `host:port`, else what is wrong.

    Sends one RpcRequest frame of Spark's transport protocol (an 8-byte frame length,
    the message type 3, a request id, a body length, a body; `MessageEncoder` and
    `RpcRequest` in Spark's network-common module) with a body no endpoint can decode.
    A Spark endpoint answers an RpcFailure (type 5) for that request id; anything
    else, or silence, is not a Spark master.
    """
    request_id = 0x64646677          # "ddfw"
    body = b"ddflow-probe"
    frame = struct.pack(">qbqi", 8 + 1 + 8 + 4 + len(body), 3, request_id, len(body)) + body
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(frame)
            got = b""
            deadline = time.monotonic() + timeout
            while len(got) < 17 and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
    except socket.timeout:
        return (f"accepted a connection but said nothing within {timeout:g} s "
                "(is it a Spark master's port, or its web UI's?)")
    except OSError as exc:
        return f"is unreachable ({exc})"
    if len(got) >= 17 and got[8] in (4, 5) and struct.unpack(">q", got[9:17])[0] == request_id:
        return None
    if not got:
        return "closed the connection without a word (not a Spark master)"
    return f"answered {got[:24]!r}, which is not Spark's RPC protocol"


def _prepare_driver_env() -> None:
    """Settings that must be in place before the JVM starts."""
    import pyspark
    os.environ.setdefault("SPARK_HOME", os.path.dirname(pyspark.__file__))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_LOCAL_HOSTNAME", "localhost")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Executors must import what the driver can: the project and the modules that
    # define user functions pickled by reference.
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + old.split(os.pathsep)))


#: Defaults of a session ddflow makes; `conf` overrides any of them.  Measured on a
#: 2-core machine (spark-notes FINDINGS): the UI, console progress and adaptive
#: execution cost more than they give a job of a few ms; a superstep's tasks want no
#: locality wait.
LOW_LATENCY_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.locality.wait": "0s",
    "spark.python.worker.reuse": "true",
    "spark.eventLog.enabled": "false",
    "spark.driver.memory": "1g",
}

#: Added for a master that is not in-process.  No network timeout is lowered: a
#: killed executor is noticed from its exit code at once, and a short timeout made
#: loaded machines drop healthy executors (issue 13: a 20k-fact load failed so).
CLUSTER_CONF = {
    "spark.executor.memory": "1g",
    "spark.executor.cores": "1",
    "spark.task.maxFailures": "8",
}


def session_conf(master: str, conf: dict | None = None) -> dict:
    """The settings `make_session` uses for `master`: defaults, then `conf`."""
    settings = dict(LOW_LATENCY_CONF)
    if not is_in_process_master(master):
        settings.update(CLUSTER_CONF)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    return settings


def make_session(master: str = "local[2]", app: str = "ddflow", conf: dict | None = None, *,
                 connect_timeout: float = 5.0, executor_timeout: float = 120.0) -> Any:
    """A SparkSession for `master`, with an executor registered (see the module doc).

    Raises `EngineUnavailableError` if Spark cannot start, if another SparkContext of
    another master already runs in this process (pass that session to the engine
    instead), or if no executor registers within `executor_timeout` seconds (the
    session is stopped first).
    """
    check_environment(master, timeout=connect_timeout)
    _prepare_driver_env()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    running = SparkContext._active_spark_context
    if running is not None and running.master != master:
        raise EngineUnavailableError(
            f"this process already runs a SparkContext for {running.master}; one process "
            f"holds one: pass that session (SparkEngine(spark=...)) or stop it before "
            f"asking for {master}")
    builder = SparkSession.builder.master(master).appName(app)
    for k, v in session_conf(master, conf).items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - JVM start failures arrive in many types
        raise EngineUnavailableError(
            f"Spark did not start with master {master}: {_first_line(exc)}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    try:
        wait_for_executors(spark.sparkContext, executor_timeout)
    except BaseException:
        spark.stop()
        raise
    return spark


def executor_count(sc: Any) -> int:
    """Executors registered with the driver now (an in-process master counts one)."""
    if is_in_process_master(sc.master):
        return 1
    # getExecutorMemoryStatus lists the driver's block manager too.
    return max(0, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)


def wait_for_executors(sc: Any, timeout: float, count: int = 1) -> int:
    """Wait until `count` executors have registered; raise `EngineUnavailableError`
    naming the master if they have not within `timeout` seconds, or if the
    SparkContext stopped meanwhile (the master dropped the application)."""
    deadline = time.monotonic() + timeout
    while True:
        if sc._jsc is None or sc._jsc.sc().isStopped():
            raise EngineUnavailableError(
                f"the SparkContext for master {sc.master} stopped before any executor "
                "registered: the master refused or dropped the application (see the "
                "master's log)")
        n = executor_count(sc)
        if n >= count:
            return n
        if time.monotonic() >= deadline:
            raise EngineUnavailableError(
                f"no executor registered with the Spark master {sc.master} within "
                f"{timeout:g} s ({n} of {count}): check that its workers are up and "
                "registered, and have the cores and memory the application asks for "
                "(spark.executor.cores / spark.executor.memory); "
                "SparkEngine(executor_timeout=...) waits longer")
        time.sleep(0.2)


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:300] if lines else type(exc).__name__


# -- what executors run --------------------------------------------------------------

PACKAGES = ("ddflow", "lattice", "operators")


def source_fingerprint(root: str | Path) -> str | None:
    """A hash of the project's sources under `root` (None if they are not files
    there, e.g. imported from a zip): executors must run the driver's code, not
    another copy of ddflow that happens to be installed where they run."""
    root = Path(root)
    digest = hashlib.sha1()
    files = sorted(f for pkg in PACKAGES for f in (root / pkg).rglob("*.py"))
    if not files:
        return None
    for f in files:
        digest.update(str(f.relative_to(root)).encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


def _probe(_: Any) -> list:
    """Run on an executor: its interpreter, and which ddflow it imports."""
    info = {"python": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3],
            "pid": os.getpid()}
    try:
        import ddflow
        import lattice  # noqa: F401
        import operators.reduce  # noqa: F401
        root = os.path.dirname(os.path.dirname(os.path.abspath(ddflow.__file__)))
        info["ddflow"] = root
        info["fingerprint"] = source_fingerprint(root) if os.path.isdir(root) else None
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        info["error"] = f"{type(exc).__name__}: {exc}"
    return [info]


def _touch(index: int, _: Any, path: str) -> list:
    """Run on an executor: write a file in `path` (a checkpoint directory) and say so."""
    name = os.path.join(path, f"probe-{os.getpid()}-{index}")
    try:
        with open(name, "w") as f:
            f.write("ddflow")
        return [name]
    except OSError as exc:
        return [f"!{exc}"]


class ExecutorSetup:
    """Makes the executors run the driver's Python and import the project."""

    def __init__(self, ship_code: bool | None, timeout: float) -> None:
        self.ship_code = ship_code
        self.timeout = timeout
        self.probe = _probe
        self.shipped: str | None = None
        self.executors: list[dict] = []

    def prepare(self, sc: Any, temporary: "Temporary") -> None:
        """Raise `ExecutorEnvironmentError` (a `DataflowError`) if, after all, the
        executors cannot import ddflow; `EngineUnavailableError` if none registers."""
        wait_for_executors(sc, self.timeout)
        if "PYSPARK_PYTHON" not in os.environ and not sc.getConf().contains(
                "spark.pyspark.python") and sc.pythonExec in ("python3", "python", None):
            # The user's session, started without saying which Python executors run:
            # PySpark would start whatever `python3` is on their PATH.
            log.info("executors' Python: %s (the driver's; set PYSPARK_PYTHON to choose)",
                     sys.executable)
            sc.pythonExec = sys.executable
        ship = (not is_local_master(sc.master)) if self.ship_code is None else self.ship_code
        if ship:
            self._ship(sc, temporary)
        infos = self._run_probe(sc)
        if self.ship_code is None and not ship and any(self._wrong(i) for i in infos):
            # A local master whose Python workers do not see the driver's project
            # (the session was started elsewhere, or another copy is installed).
            log.info("executors %s: shipping the project",
                     next(self._wrong(i) for i in infos if self._wrong(i)))
            self._ship(sc, temporary)
            infos = self._run_probe(sc)
        bad = [(i, self._wrong(i)) for i in infos if self._wrong(i)]
        if bad:
            i, why = bad[0]
            raise ExecutorEnvironmentError(
                f"Spark executors cannot run the driver's ddflow: their Python {i['python']} "
                f"({i['version']}) {why}.  Install the project in that Python "
                "(`pip install -e .`), point PYSPARK_PYTHON at a Python that has it, or "
                "use SparkEngine(ship_code=True)")
        self.executors = infos

    def _wrong(self, info: dict) -> str | None:
        """What is wrong with an executor's probe answer (None: it runs our code)."""
        if "error" in info:
            return f"says {info['error']}"
        if self.shipped and os.path.basename(info["ddflow"]) == os.path.basename(self.shipped):
            return None         # imported from the zip made of the driver's files
        if info["fingerprint"] != _driver_fingerprint():
            if os.path.realpath(info["ddflow"]) == os.path.realpath(_project_root()):
                # Same directory, other contents: the source was edited (a checkout
                # switched, a merge) after the driver imported it.
                return (f"imports ddflow from the driver's own directory {info['ddflow']}, "
                        "but its files changed after the driver imported them: restart "
                        "the driver")
            return (f"imports another copy of ddflow (from {info['ddflow']}, the driver's "
                    f"is {_project_root()})")
        return None

    def _ship(self, sc: Any, temporary: "Temporary") -> None:
        """Add the project's zip to the session, once per SparkContext: its Python
        workers keep the first copy they imported, and executors that start later
        (after a loss) fetch it from the driver, so it lives as long as the session,
        in Spark's own files directory, which Spark deletes when the session stops."""
        if self.shipped is not None:
            return
        key = sc.applicationId
        if key not in _SHIPPED:
            from pyspark import SparkFiles
            folder = tempfile.mkdtemp(prefix="ddflow-ship-", dir=SparkFiles.getRootDirectory())
            _SHIPPED[key] = project_zip(folder)
            sc.addPyFile(_SHIPPED[key])
        self.shipped = _SHIPPED[key]

    def _run_probe(self, sc: Any) -> list[dict]:
        n = max(2, sc.defaultParallelism)
        try:
            return sc.parallelize(range(n), n).mapPartitions(self.probe).collect()
        except Exception as exc:  # noqa: BLE001 - Py4J wraps the executor's failure
            text = str(exc)
            reason = next((ln.strip() for ln in text.splitlines()
                           if "Python in worker" in ln or "Cannot run program" in ln
                           or "Error:" in ln), _first_line(exc))
            raise ExecutorEnvironmentError(
                f"Spark executors running {sc.pythonExec} could not run ddflow's probe "
                f"({reason[:300]}); the driver runs {sys.executable} "
                f"({'%d.%d.%d' % sys.version_info[:3]}): executors need the same Python "
                "minor version with the project installed (PYSPARK_PYTHON chooses their "
                "interpreter), or SparkEngine(ship_code=True)") from exc


def _project_root() -> Path:
    return Path(__file__).resolve().parents[2]


_FINGERPRINT: list[str | None] = []


def _driver_fingerprint() -> str | None:
    if not _FINGERPRINT:
        _FINGERPRINT.append(source_fingerprint(_project_root()))
    return _FINGERPRINT[0]


#: The zip shipped to each running SparkContext (by application id).
_SHIPPED: dict[str, str] = {}


def project_zip(folder: str | None = None) -> str:
    """The three packages as a zip for `addPyFile` (executors without the install)."""
    root = _project_root()
    fd, path = tempfile.mkstemp(prefix="ddflow-", suffix=".zip", dir=folder)
    os.close(fd)
    with zipfile.ZipFile(path, "w") as z:
        for pkg in PACKAGES:
            for f in (root / pkg).rglob("*.py"):
                z.write(f, f.relative_to(root))
    return path


# -- files ---------------------------------------------------------------------------

class Temporary:
    """Paths an engine made: removed at `stop()`; whatever is left at interpreter exit."""

    _everyone: list["Temporary"] = []

    def __init__(self) -> None:
        self.paths: list[str] = []
        Temporary._everyone.append(self)

    def add(self, path: str) -> str:
        self.paths.append(path)
        return path

    def remove(self) -> None:
        for path in self.paths:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.remove(path)
        self.paths = []


atexit.register(lambda: [t.remove() for t in Temporary._everyone])


class CheckpointDir:
    """The engine's checkpoint directory: `<base>/ddflow-ckpt-<id>`, its own.

    `base` is the user's `checkpoint_dir` (a local path or any Hadoop filesystem URI
    every executor can reach), or, on a local master only, the temp dir.  The
    directory is made through Hadoop's FileSystem (so `hdfs://`, `s3a://` ... work as
    Spark's own `setCheckpointDir` does); a local path with a cluster master is also
    written by the executors and read back here, which fails unless the machines
    share it.  `remove()` deletes this directory only, never `base`.
    """

    @staticmethod
    def require(master: str, base: str | None) -> None:
        """Refuse a cluster master without `checkpoint_dir` (before any job)."""
        if base is None and not is_local_master(master):
            raise EngineUnavailableError(
                f"SparkEngine needs checkpoint_dir=... for master {master}: a directory "
                "every executor and the driver can reach (HDFS, S3, a shared mount); "
                "the driver's temp dir is not on the other machines")

    def __init__(self, sc: Any, base: str | None, temporary: Temporary) -> None:
        master = sc.master
        self.require(master, base)
        if base is None:
            self.path = temporary.add(tempfile.mkdtemp(prefix="ddflow-ckpt-"))
            self.local = True
            return
        root = base[len("file:"):] if base.startswith("file:") and "://" not in base else base
        self.path = f"{root.rstrip('/')}/ddflow-ckpt-{uuid.uuid4().hex[:12]}"
        self._sc = sc
        try:
            fs, p = self._fs()
            if not fs.mkdirs(p):
                raise OSError("mkdirs returned false")
            # A path without a scheme is on Hadoop's default filesystem, as for
            # Spark's own setCheckpointDir: ask it which one that is.
            self.local = fs.getUri().getScheme() == "file"
        except Exception as exc:  # noqa: BLE001 - Py4J wraps Hadoop's IOException
            raise EngineUnavailableError(
                f"checkpoint_dir {base!r}: cannot make {self.path} ({_first_line(exc)})") from exc
        if self.local:
            self.path = str(fs.makeQualified(p).toUri().getPath())
            temporary.add(self.path)
            if not is_local_master(master):
                self._check_shared(sc)

    def _fs(self) -> tuple[Any, Any]:
        jvm = self._sc._jvm
        p = jvm.org.apache.hadoop.fs.Path(self.path)
        return p.getFileSystem(self._sc._jsc.hadoopConfiguration()), p

    def _check_shared(self, sc: Any) -> None:
        n = max(2, sc.defaultParallelism)
        path = self.path
        written = sc.parallelize(range(n), n).mapPartitionsWithIndex(
            lambda i, it: _touch(i, it, path)).collect()
        failed = [w[1:] for w in written if w.startswith("!")]
        seen = [w for w in written if not w.startswith("!") and os.path.exists(w)]
        for w in seen:
            os.remove(w)
        if failed or len(seen) < len(written):
            why = failed[0] if failed else "files the executors wrote there are not seen here"
            raise EngineUnavailableError(
                f"checkpoint_dir {path!r} is not shared by the executors and the driver "
                f"({why}): give a directory every machine reaches (HDFS, S3, a shared mount)")

    def remove(self) -> None:
        if self.local:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        try:
            fs, p = self._fs()
            fs.delete(p, True)
        except Exception as exc:  # noqa: BLE001 - the JVM may be gone already
            log.warning("could not remove the checkpoint directory %s: %s", self.path,
                        _first_line(exc))
