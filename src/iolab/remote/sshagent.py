"""The program iolab runs on an ``ssh://`` host for a run (``remote.sshhost`` says what it does).

It is Python's standard library plus the sources of iolab's fence (``runner.fence``, ``runner.landlock``)
and facts modules (``facts``), imported from memory (``bundle``, ``LOADER``), so iolab need not be
installed on the host. It speaks one JSON line per message: requests on its stdin (``serve``, ``facts``,
``sample``, each with a ``seq`` that its answer repeats), answers on its stdout marked ``IOLAB-HELLO``,
``IOLAB-SERVING``, ``IOLAB-REFUSED``, ``IOLAB-FAILED``, ``IOLAB-FACTS``, ``IOLAB-SAMPLE``, ``IOLAB-BROKEN``.
It ends at its stdin's EOF, on SIGTERM/SIGHUP/SIGINT and with its parent, stopping the fio server it
started and removing its directory.

What the host is (its facts, fio's version, whether bubblewrap fences there: three bwrap runs) is
found at once when the agent starts, in threads, so that the first ``facts`` request after
``IOLAB-HELLO`` finds the host's facts ready.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from ..runner import fence as fence_mod

#: The modules that describe a host and a target (``remote.ssh`` sends them too).
FACTS_MODULES = ("iolab.histogram", "iolab.model", "iolab.facts", "iolab.facts.sysfs", "iolab.facts.idle",
                 "iolab.facts.host", "iolab.facts.targets")
_MODULES = ("iolab", "iolab.errors", "iolab.runner", "iolab.runner.landlock", "iolab.runner.once",
            "iolab.runner.fence", *FACTS_MODULES)
_PACKAGES = ("iolab", "iolab.runner", "iolab.facts")
#: What the remote Python runs: read one JSON line (the program) from stdin and run it.
BOOT = "import sys,json;exec(json.loads(sys.stdin.readline()))"


def python_command(args: str) -> str:
    """The command (for the remote login shell, any of sh, bash, zsh, fish, csh) that runs the host's
    Python with ``args``: the system's ``/usr/bin/python3`` when it is there and 3.9 or newer, else the
    ``python3`` the login shell's ``PATH`` finds. iolab's programs need only the standard library, and
    a ``python3`` that the login's PATH puts first may be a version manager's shim (pyenv's is a shell
    script that starts another: ~0.15 s and ~0.2 s of CPU per start here)."""
    inner = ('p=/usr/bin/python3; "$p" -I -S -c "import sys; sys.exit(sys.version_info < (3, 9))" 2>/dev/null '
             f'|| p=python3; exec "$p" {args}')
    return f"sh -c {shlex.quote(inner)}"

#: Imports the modules of ``SOURCES`` (name -> source; those in ``PACKAGES`` are packages) from
#: memory, and stands in for what only iolab's (de)serialisers use, which the host need not have.
LOADER = r'''
import importlib.machinery, sys, types


class _Sources:  # a meta path finder and its loader (importlib.abc would import importlib.resources: 25 ms)
    def find_spec(self, name, path=None, target=None):
        if name in SOURCES:
            return importlib.machinery.ModuleSpec(name, self, is_package=name in PACKAGES)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(compile(SOURCES[module.__name__], "<iolab:%s>" % module.__name__, "exec"), module.__dict__)


sys.meta_path.insert(0, _Sources())
sys.modules["pydantic"] = types.SimpleNamespace(TypeAdapter=None)
sys.modules["pydantic_core"] = types.SimpleNamespace(core_schema=None)
sys.modules["orjson"] = types.SimpleNamespace()
'''


def bundle(modules: Sequence[str], packages: Sequence[str]) -> str:
    """The start of a program run on another host: the sources of iolab's ``modules`` (``SOURCES``,
    read from this installation; ``packages`` are packages: their source is their ``__init__.py``)
    and ``LOADER``, which imports them from memory."""
    root = Path(fence_mod.__file__).parents[1]  # the iolab package
    sources = {}
    for name in modules:
        parts = name.split(".")[1:]
        rel = Path(*parts, "__init__.py") if name in packages else Path(*parts[:-1], parts[-1] + ".py")
        sources[name] = (root / rel).read_text()
    return f"SOURCES = {json.dumps(sources)}\nPACKAGES = {json.dumps(list(packages))}\n{LOADER}"


_AGENT = r'''
import ctypes, dataclasses, json, os, platform, selectors, shutil, signal, socket
import subprocess, sys, tempfile, threading, time

SEQ = None  # the request being answered (its answer repeats it: a late answer is told from the next one's)


def say(marker, obj):
    try:
        sys.stdout.write(marker + " " + json.dumps(dict(obj, seq=SEQ)) + "\n")
        sys.stdout.flush()
    except OSError:  # iolab is gone (it gave up waiting, or died): nothing to answer, leave
        leave()


directory = tempfile.mkdtemp(prefix="iolab-ssh-")  # mode 0700: only this user enters it
lib, work = os.path.join(directory, "lib"), os.path.join(directory, "work")
os.mkdir(lib, 0o700)
os.mkdir(work, 0o700)
server = None
served = None  # (the fence asked for, the answer) of the running server


def stop_server():
    global server, served
    served = None
    if server is not None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(server.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                server.wait(timeout=3)
                break
            except subprocess.TimeoutExpired:
                pass
        server = None
    try:
        os.unlink(os.path.join(work, "fio.sock"))
    except OSError:
        pass


def leave(*_args):
    stop_server()
    shutil.rmtree(directory, ignore_errors=True)
    os._exit(0)


for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, leave)
try:  # the session's process gone: leave too
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)
except Exception:
    pass
try:
    with open(os.path.join(lib, "landlock.py"), "w") as f:
        f.write(SOURCES["iolab.runner.landlock"])
    import iolab.runner.landlock
    iolab.runner.landlock.__file__ = os.path.join(lib, "landlock.py")  # the fence reads its text from there
    from iolab.runner import fence
    from iolab.errors import SafetyError
    fio = shutil.which("fio")
    asked = subprocess.Popen([fio, "--version"], stdout=subprocess.PIPE, text=True) if fio else None
    fenced = []
    checking = threading.Thread(target=lambda: fenced.append(fence.status()), daemon=True)
    checking.start()  # meanwhile
    version = (asked.communicate()[0].strip() or None) if asked else None
    HOST_FACTS = []  # host.host_facts(host.fio_version()), without asking fio again

    def describe():
        from iolab.facts import host
        HOST_FACTS.append(dataclasses.asdict(host.host_facts(
            version.splitlines()[0].removeprefix("fio-") or None if version else None)))

    describing = threading.Thread(target=describe, daemon=True)
    describing.start()
    checking.join()
    found = fenced[0]
    say("IOLAB-HELLO", {"fio": version, "fio_path": fio, "fence": found.tool, "fence_reason": found.reason,
                        "hostname": socket.gethostname(), "directory": directory, "user": os.getuid(),
                        "arch": platform.machine(), "cpus": os.cpu_count(), "os": platform.system()})
except Exception as exc:
    say("IOLAB-BROKEN", {"error": "%s: %s" % (type(exc).__name__, exc)})
    leave()


RELAY = os.path.join(directory, "relay.sock")


def relay_one(conn):
    # fio's server looks at a new connection once, then sleeps up to 1 s: connect to it only when the
    # client's first messages are here, and hand them over at once (as remote.relay does over TCP)
    with conn:
        ready = selectors.DefaultSelector()
        ready.register(conn, selectors.EVENT_READ)
        first = b""
        while ready.select(2.0 if not first else 0.005):
            data = conn.recv(65536)
            if not data:
                break
            first += data
        ready.close()
        if not first:
            return
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(os.path.join(work, "fio.sock"))
            up.sendall(first)
        except OSError:
            up.close()
            return
        with up, selectors.DefaultSelector() as sel:
            sel.register(conn, selectors.EVENT_READ, up)
            sel.register(up, selectors.EVENT_READ, conn)
            while True:
                for key, _ in sel.select():
                    try:
                        data = key.fileobj.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        return
                    try:
                        key.data.sendall(data)
                    except OSError:
                        return


def relay_loop(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=relay_one, args=(conn,), daemon=True).start()


# bound here, in the thread that runs leave(): bound in the relay's thread, it could land in the
# directory while leave() removes it, and the directory would stay
relay = socket.socket(socket.AF_UNIX)
relay.bind(RELAY)
relay.listen(64)
threading.Thread(target=relay_loop, args=(relay,), daemon=True).start()


def facts(request):
    from iolab.facts import targets
    path = request["path"]
    describing.join()  # the machine does not change within a run; the target is looked at every time
    found = targets.inspect(path) if path else None
    say("IOLAB-FACTS", {"host": HOST_FACTS[0], "target": dataclasses.asdict(found) if found else None,
                        "listing": sorted(os.listdir(path)) if path and os.path.isdir(path) else None})


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def sample(request):  # observe.sshsample: what a node_exporter would say of the host's CPUs, disks and NICs
    netdev = read("/proc/net/dev") or ""
    names = [line.partition(":")[0].strip() for line in netdev.splitlines()[2:] if ":" in line]
    say("IOLAB-SAMPLE", {"stat": read("/proc/stat"), "diskstats": read("/proc/diskstats"), "netdev": netdev,
                         "speeds": {n: read("/sys/class/net/%s/speed" % n) for n in names},
                         "hz": os.sysconf("SC_CLK_TCK"), "host": platform.node(), "kernel": platform.release(),
                         "cpus": os.cpu_count()})


def unfenced():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # dies with this agent


def serve(request):
    global server, served
    asked = json.dumps([request["writable"], request["read"], request["fenced"]], sort_keys=True)
    if served is not None and served[0] == asked and server is not None and server.poll() is None:
        say("IOLAB-SERVING", served[1])  # the same fence, and its server still runs (a cut may have killed it)
        return
    stop_server()
    sock = os.path.join(work, "fio.sock")
    command = [fio, "--server=sock:" + sock]
    places = None
    if request["fenced"]:
        try:
            built = fence.build(request["writable"], fence.Path(work), read=request["read"])
        except SafetyError as exc:
            say("IOLAB-REFUSED", {"error": exc.message, "hint": exc.hint})
            return
        argv, places = built.argv(command), built.places()
    else:
        argv = command
    log = open(os.path.join(directory, "server.log"), "wb")
    server = subprocess.Popen(argv, cwd=work, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=None if request["fenced"] else unfenced)
    deadline = time.monotonic() + request["timeout_s"]
    while True:
        if server.poll() is not None:
            with open(os.path.join(directory, "server.log"), errors="replace") as f:
                said = [x for x in f.read().splitlines() if x.strip()][-5:]
            say("IOLAB-FAILED", {"error": "the fio server exited %s: %s" % (server.returncode, " / ".join(said))})
            server = None
            return
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(sock)
            break
        except OSError:
            if time.monotonic() > deadline:
                stop_server()
                say("IOLAB-FAILED", {"error": "the fio server did not listen within %s s" % request["timeout_s"]})
                return
            time.sleep(0.02)
    served = (asked, {"socket": RELAY, "argv": argv, "places": places, "work": work})
    say("IOLAB-SERVING", served[1])


while True:
    line = sys.stdin.readline()
    if not line:
        leave()  # iolab closed the session, died, or the connection dropped
    request = json.loads(line)
    SEQ = request.get("seq")
    try:
        if request.get("op") == "serve":
            serve(request)
        elif request.get("op") == "facts":
            facts(request)
        elif request.get("op") == "sample":
            sample(request)
    except Exception as exc:
        say("IOLAB-FAILED", {"error": "%s: %s" % (type(exc).__name__, exc)})
'''


@functools.cache
def program() -> str:
    """The agent with the sources it imports (``bundle``), as the one line ``BOOT`` reads (JSON)."""
    return json.dumps(f"{bundle(_MODULES, _PACKAGES)}{_AGENT}")
