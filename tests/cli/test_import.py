"""`iolab import`: every real fio output in tests/data/fio through the CLI, exact values, provenance,
duplicates, per-host client results, unknowns. The workload identity derived from each format:
tests/unit/workflows/test_import_plan.py; the stored report's JSON: tests/unit/ground/test_model_json.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fiosamples import NOT_OUTPUT, OUTPUTS
from importchecks import said
from inprocess import iolab
from iolab.fio import parse_output
from iolab.store.database import Store
from iolab.workflows.importer import read_source
from paths import FIELD
from paths import FIO as DATA

#: (file, target, fio job, direction): total_ios, runtime_ms, io_bytes, clat mean ns, clat p99 ns — read from
#: the files by hand (2.2.8 JSON: io_bytes in KiB, latencies in µs; normal: issued totals, unit per line).
#: A local result's target is the device its disk statistics name: vda in every sample.
EXPECTED = {
    ("seed001_local_ssd_fio316.txt", "vda", "test", "write"): (71936, 60071, None, 106.80e6, 180e6),
    ("seed001_ceph_rbd_fio316.txt", "vda", "test", "write"): (288149, 60015, None, 26.42e6, 317e6),
    ("fio-2.2.8_randrw_posixaio.json", "vda", "randrw", "read"): (51499, 2001, 205996 * 1024, 431_140, 700_000),
    ("fio-2.2.8_randrw_posixaio.json", "vda", "randrw", "write"): (22053, 2001, 88212 * 1024, None, None),
    ("fio-2.2.8_randrw_posixaio.normal.txt", "vda", "randrw", "read"): (50071, 2001, 50071 * 4096, 445_070,
                                                                          764_000),
    ("fio-3.33_randrw_libaio.normal.txt", "vda", "randrw", "read"): (214015, 3001, 214015 * 4096, 145_160,
                                                                       355_000),
    ("fio-3.33_randrw_libaio.json", "vda", "randrw", "read"): (213160, 3001, 873103360, 144298.934345, 423936),
    ("fio-3.33_randrw_libaio.terse-v5.txt", "vda", "randrw", "read"): (None, 2001, 609624 * 1024, None, None),
    ("fio-3.33_client_two_hosts.json", "127.0.0.1:8765", "cs-randread", "read"): (108877, 2001, None, None, None),
    ("fio-3.33_client_two_hosts.json", "127.0.0.1:8766", "cs-randread", "read"): (109527, 2001, None, None, None),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Every fio output file imported in one CLI call, then shown as JSON."""
    db = tmp_path_factory.mktemp("import") / "iolab.db"
    proc = iolab("import", *map(str, OUTPUTS), "--label", "samples", "--tag", "set=all", "--format", "csv", db=db)
    assert proc.returncode == 0, proc.stderr
    docs = json.loads(iolab("show", "samples", "--format", "json", db=db).stdout)["runs"]
    return db, proc, {Path(d["run"]["source"]["path"]).name: d for d in docs}


def test_every_sample_imports_as_its_own_run(imported):
    _, proc, docs = imported
    assert sorted(docs) == sorted(p.name for p in OUTPUTS)
    for path in OUTPUTS:
        assert f"Imported {path} as run " in proc.stderr
        run = docs[path.name]["run"]
        assert (run["origin"], run["label"], run["tags"], run["suite_name"]) == ("imported", "samples", {"set": "all"},
                                                                                 path.name)
        assert run["source"]["sha256"] == read_source(path)[1] and run["source"]["size_bytes"] == \
            str(path.stat().st_size)
        report = parse_output(path.read_text(), path.name)
        assert run["fio_version"] == report.fio_version and run["source"]["format"] == report.source_format
        assert tuple(run["warnings"]) == report.warnings


def test_exact_values(imported):
    _, _, docs = imported
    seen = set()
    for doc in docs.values():
        for result in doc["results"]:
            for job in result["jobs"]:
                for d in job["directions"].values():
                    if d["total_ios"] and d["runtime_ms"]:  # fio's own formula, never the display
                        assert d["iops"] == d["total_ios"] * 1000 / d["runtime_ms"]
    for (name, target, job, direction), (total, runtime, nbytes, clat_mean, p99) in EXPECTED.items():
        result = next(r for r in docs[name]["results"] if r["target"] == target)
        d = next(j for j in result["jobs"] if j["name"] == job)["directions"][direction]
        assert (d["total_ios"], d["runtime_ms"]) == (total, runtime), name
        if nbytes is not None:
            assert d["io_bytes"] == nbytes and d["bw_bytes_s"] == pytest.approx(nbytes * 1000 / runtime), name
        if clat_mean is not None:
            assert d["clat"]["mean_ns"] == pytest.approx(clat_mean) and d["clat"]["percentiles_ns"]["99"] == p99, name
        seen.add(name)
    terse = docs["fio-3.33_randrw_libaio.terse-v5.txt"]["results"][0]["jobs"][0]["directions"]["read"]
    assert terse["iops"] == 76164  # terse prints no I/O count: fio's integer IOPS is all there is


def test_client_json_gives_per_host_results(imported):
    _, _, docs = imported
    results = docs["fio-3.33_client_two_hosts.json"]["results"]
    assert [(r["target"], r["workload"], r["seq"]) for r in results] == [
        ("127.0.0.1:8765", "cs-randread", 0), ("127.0.0.1:8766", "cs-randread", 1)]
    assert [[j["port"] for j in r["jobs"]] for r in results] == [[8765], [8766]]  # "All clients" is not a host
    assert [r["target_path"] for r in results] == ["/data/fio/cs_file1", "/data/fio/cs_file2"]
    assert results[0]["params"]["rw"] == "randread" and results[0]["params"]["size"] == "32m"


def test_failed_job_makes_a_failed_result(imported):
    _, _, docs = imported
    doc = docs["fio-3.33_error_json_stdout_with_prefix_line.txt"]
    assert doc["run"]["status"] == "failed"
    assert doc["results"][0]["status"] == "failed" and doc["results"][0]["error"] == "fio error 95 in job 'h'"


def test_stored_text_is_the_file_once_per_run(imported):
    db, _, docs = imported
    store = Store(f"sqlite:///{db}")
    for path in [*OUTPUTS[:5], DATA / "fio-3.33_client_two_hosts.json"]:
        first, *rest = docs[path.name]["results"]
        assert store.raw_json(first["id"]) == path.read_text()
        assert all(store.raw_json(r["id"]) is None for r in rest)


def test_a_file_imported_before_is_skipped_naming_its_run(imported, tmp_path):
    db, _, docs = imported
    path = DATA / "seed001_local_ssd_fio316.txt"
    earlier = docs[path.name]["run"]["id"]
    copy = tmp_path / "renamed.txt"
    copy.write_bytes(path.read_bytes())  # the checksum, not the name, identifies the file
    proc = iolab("import", str(copy), db=db)
    assert proc.returncode == 0, proc.stderr  # nothing went wrong: there is nothing new to store
    assert f"Skipped {copy}: already imported in run {earlier}" in said(proc)
    with sqlite3.connect(db) as conn:
        assert conn.execute("select count(*) from runs").fetchone()[0] == len(OUTPUTS)


def test_files_that_are_not_fio_output_are_clear_errors_and_the_rest_imports(tmp_path):
    db = tmp_path / "iolab.db"
    bad = sorted(NOT_OUTPUT.iterdir())
    good = DATA / "fio-3.33_randrw_libaio.json"
    proc = iolab("import", *map(str, bad), str(good), str(tmp_path / "missing.json"), db=db)
    assert proc.returncode == 2  # the highest failure: a missing file is a usage error (2), not-fio 1
    assert "Traceback" not in proc.stderr
    for path in bad:
        assert f"Error: {path}: not a fio output" in proc.stderr
    assert "cannot read" in proc.stderr and "missing.json" in proc.stderr
    assert f"Imported {good} as run 1" in proc.stderr and "randrw" in proc.stdout


def test_unknown_stays_unknown_in_every_format(tmp_path):
    db = tmp_path / "iolab.db"
    seed, terse = DATA / "seed001_local_ssd_fio316.txt", DATA / "fio-3.33_randrw_libaio.terse-v3.txt"
    assert iolab("import", str(seed), str(terse), db=db).returncode == 0
    table = iolab("show", "1", db=db).stdout
    row = next(line for line in table.splitlines() if " write " in line).split()
    assert row[:5] == ["vda", "test", "write", "1", "1197.5"]  # the target its disk statistics name
    assert row[5] == "≈4.68"  # MiB/s: no block size known, so fio's printed 4790KiB/s, marked as rounded
    csv = iolab("show", "1", "--format", "csv", db=db).stdout.splitlines()
    header, values = csv[0].split(","), csv[1].split(",")
    assert float(values[header.index("bw_mib_s")]) == 4790 / 1024 and values[header.index("rounded")] == "bw"
    doc = json.loads(iolab("show", "1", "2", "--format", "json", db=db).stdout)["runs"]  # iolab.run-set/1
    write = doc[0]["results"][0]["jobs"][0]["directions"]["write"]
    assert write["io_bytes"] is None and write["bw_bytes_s"] is None and write["clat"]["samples"] is None
    assert write["bw_bytes_s_shown"] == 4790 * 1024  # the exact field stays unknown; the display is apart
    assert doc[0]["summary"][0]["bw_bytes_s"]["mean"] == 4790 * 1024 and doc[0]["summary"][0]["rounded"] == ["bw"]
    read = doc[1]["results"][0]["jobs"][0]["directions"]["read"]
    assert read["total_ios"] is None and read["iops"] == 75754  # terse: no I/O count


def test_logs_named_by_the_json_options_are_found_beside_it(tmp_path):
    text = (DATA / "fio-3.33_randrw_libaio.json").read_text().replace(
        '"iodepth" : "16"', '"iodepth" : "16", "write_iops_log" : "avg", "write_lat_log" : "logs/perio"')
    out = tmp_path / "result.json"
    out.write_text(text)
    (tmp_path / "logs").mkdir()
    iops = "".join(f"{t}, {v}, 0, 0, 0\n{t}, {v // 2}, 1, 0, 0\n" for t, v in ((1000, 70000), (2000, 72000)))
    for name in ("avg_iops.1.log", "avg_bw.1.log", "unrelated_iops.1.log"):
        (tmp_path / name).write_text(iops)
    for name in ("logs/perio_clat.1.log", "logs/perio_lat.1.log", "logs/perio_slat.1.log"):
        (tmp_path / name).write_text("1000, 150000, 0, 0, 0\n2000, 145000, 0, 0, 0\n")
    db = tmp_path / "iolab.db"
    proc = iolab("import", str(out), db=db)
    assert proc.returncode == 0, proc.stderr
    assert "logs: 4 attached (5 time series), 0 not attached" in said(proc)  # no write_bw_log asked for avg_bw
    doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in doc["results"][0]["extra"]["log_files"]) == [
        "avg_iops.1.log", "logs/perio_clat.1.log", "logs/perio_lat.1.log", "logs/perio_slat.1.log"]


def test_latin1_text_and_pasted_crlf_import(tmp_path):
    text = (DATA / "fio-3.33_randrw_libaio.normal.txt").read_text().replace("randrw:", "randrw\u00e9:")
    path = tmp_path / "pasted.txt"
    path.write_bytes(text.replace("\n", "\r\n").encode("latin-1"))
    db = tmp_path / "iolab.db"
    assert iolab("import", str(path), db=db).returncode == 0
    doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
    assert doc["results"][0]["workload"] == "randrw\u00e9"
    assert doc["results"][0]["jobs"][0]["directions"]["read"]["total_ios"] == 214015


def test_the_same_content_twice_in_one_command(tmp_path):
    db = tmp_path / "iolab.db"
    path = DATA / "fio-3.33_randrw_libaio.terse-v5.txt"
    copy = tmp_path / "copy.txt"
    copy.write_bytes(path.read_bytes())
    proc = iolab("import", str(path), str(copy), db=db)
    assert proc.returncode == 0, proc.stderr
    assert f"Imported {path} as run 1" in said(proc) and f"Skipped {copy}: the same content as {path}" in said(proc)


def test_outputs_of_one_job_on_different_devices_are_never_repetitions(tmp_path):
    """The ESXi field report's two fio 3.7 outputs (the same job on a passed-through NVMe disk and on a
    virtual disk) in one directory: two targets named after their devices and a line saying why, not
    one workload with n=2; --label-from name makes a labelled run of each file, so compare pairs them."""
    reports = tmp_path / "reports"
    reports.mkdir()
    for name in ("directpath-fio37.txt", "virtual-fio37.txt"):
        (reports / name).write_text((FIELD / name).read_text())
    db = tmp_path / "db.sqlite"
    assert iolab("import", str(reports), db=db).returncode == 0
    run = Store(f"sqlite:///{db}").get_run(1)
    assert sorted((r.target, r.repeat) for r in run.results) == [("nvme0n1", 0), ("sdb", 0)]
    assert ("the same job ran on different devices (nvme0n1; sdb in fio's disk statistics): stored as one target "
            "each, not as repetitions of one") in run.info.warnings
    proc = iolab("import", str(reports), "--label-from", "name", db=tmp_path / "per-file.sqlite")
    assert proc.returncode == 0, proc.stderr
    compared = iolab("compare", "directpath-fio37", "virtual-fio37", "--metric", "iops", "--format", "json",
                     db=tmp_path / "per-file.sqlite")
    rows = json.loads(compared.stdout)["comparisons"][0]["pairs"]
    changes = {p["direction"]: p["metrics"][0]["relative_change"] for p in rows}
    assert changes["write"] == pytest.approx(-0.216, abs=0.0005)  # the report published -18.4 % from fio's display
