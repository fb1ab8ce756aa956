"""The programs iolab sends to ssh hosts, run here without ssh: their one source loader, and the Python
they run on."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from iolab.facts import host
from iolab.remote import ssh, sshagent


def test_both_programs_import_iolabs_modules_from_the_one_loader_without_iolab_installed(tmp_path):
    """``sshagent.bundle`` is the start of the agent and of ``remote.ssh``'s facts program: run in an
    isolated interpreter (``-I``: no site-packages, no iolab), each imports iolab's modules from memory."""
    facts = subprocess.run([sys.executable, "-I", "-"], input=ssh.program(str(tmp_path)), capture_output=True,
                           text=True, cwd=tmp_path, check=True).stdout
    line = next(x for x in facts.splitlines() if x.startswith("IOLAB-FACTS "))
    gathered = json.loads(line.removeprefix("IOLAB-FACTS "))
    assert gathered["target"]["kind"] == "directory"
    here = host.host_facts()  # the idle facts travel with the rest (facts.idle is in the bundle)
    assert (gathered["host"]["cpuidle_driver"], gathered["host"]["cpuidle_governor"]) == (
        here.cpuidle_driver, here.cpuidle_governor)
    assert [s["name"] for s in gathered["host"]["idle_states"] or ()] == [s.name for s in here.idle_states or ()]
    assert "cpu_dma_latency_us" in gathered["host"]
    code = (sshagent.bundle(sshagent._MODULES, sshagent._PACKAGES)
            + "import iolab.runner.fence, iolab.facts.targets, sys\n"
              "print(sorted(m for m in sys.modules if m.startswith('iolab')))\n")
    loaded = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            check=True).stdout
    assert "'iolab.runner.fence'" in loaded and "'iolab.facts.targets'" in loaded
    assert sshagent.bundle.__doc__ and ssh.program.__module__ == "iolab.remote.ssh"
    assert "class _Sources" not in Path(ssh.__file__).read_text()  # one definition, in sshagent


def test_the_remote_python_is_the_systems_when_it_is_new_enough():
    """``python_command`` runs ``/usr/bin/python3`` (3.9+) rather than what the login's PATH finds
    first (a version manager's shim), and ``python3`` from the PATH otherwise."""
    shown = "-c 'import sys; print(sys.executable)'"
    ran = subprocess.run(["sh", "-c", sshagent.python_command(shown)], capture_output=True, text=True, check=True)
    system = Path("/usr/bin/python3")
    ok = system.exists() and subprocess.run([str(system), "-c", "import sys; sys.exit(sys.version_info < (3, 9))"],
                                            check=False).returncode == 0
    assert ran.stdout.strip() == (str(system) if ok else
                                  subprocess.run(["python3", "-c", "import sys; print(sys.executable)"],
                                                 capture_output=True, text=True, check=True).stdout.strip())
    missing = sshagent.python_command(shown).replace("/usr/bin/python3", "/nonexistent/python3")
    fallback = subprocess.run(["sh", "-c", missing], capture_output=True, text=True, check=True).stdout.strip()
    assert fallback and fallback != "/nonexistent/python3" and shutil.which("python3")
