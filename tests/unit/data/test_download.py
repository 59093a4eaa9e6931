import hashlib
import http.server
import json
import lzma
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ppml.data.download import (UNAVAILABLE, ChecksumError, DataUnavailableError, DownloadError,
                                download_dataset, read_status)
from ppml.data.sources import DATASETS, Dataset, SourceFile

REPO = Path(__file__).resolve().parents[3]
FILES = {"a.txt": b"alpha\n" * 50, "sub/b.csv": b"id,x\n1,2\n"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _toy(base_url: str | None = None) -> dict[str, Dataset]:
    files = tuple(SourceFile(name, _sha(data), len(data), None if base_url is None else f"{base_url}/{name}")
                  for name, data in FILES.items())
    return {"toy": Dataset(key="toy", title="toy", homepage="https://example.org/toy", files=files)}


def _mirror(root: Path, *, xz: bool = False, files: dict[str, bytes] = FILES) -> Path:
    for name, data in files.items():
        path = root / "toy" / (name + ".xz" if xz else name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(lzma.compress(data) if xz else data)
    return root


def _all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


class _Server:
    """A tiny HTTP server on 127.0.0.1 serving `content` by path; `/slow/...` answers only when released."""

    def __init__(self, content: dict[str, bytes]) -> None:
        release = self.release = threading.Event()
        self.requests: list[str] = []
        requests = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                requests.append(self.path)
                if self.path.startswith("/slow/"):
                    release.wait(10)
                    return
                body = content.get(self.path.lstrip("/"))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def server():
    srv = _Server(dict(FILES))
    yield srv
    srv.close()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("xz", [False, True])
def test_mirror_copy_is_verified_and_status_written(tmp_path, xz):
    mirror = _mirror(tmp_path / "mirror", xz=xz)
    out = tmp_path / "raw" / "toy"
    status = download_dataset("toy", out, required=True, mirror=mirror, registry=_toy())
    assert status == {"dataset": "toy", "available": True, "synthetic": False, "source": "registry",
                      "files": {name: _sha(data) for name, data in FILES.items()}}
    assert read_status(out) == status
    assert _all_files(out) == ["a.txt", "status.json", "sub/b.csv"]
    for name, data in FILES.items():
        assert (out / name).read_bytes() == data


def test_another_split_downloads_the_files_of_the_registry_key_it_names(tmp_path):
    """``files_of``: dataset toy_2h is toy's files (from the mirror's toy/ directory), and its status says so."""
    mirror = _mirror(tmp_path / "mirror")
    out = tmp_path / "raw" / "toy_2h"
    status = download_dataset("toy_2h", out, required=True, mirror=mirror, files_of="toy", registry=_toy())
    assert status == {"dataset": "toy_2h", "available": True, "synthetic": False, "source": "registry",
                      "files_of": "toy", "files": {name: _sha(data) for name, data in FILES.items()}}
    assert _all_files(out) == ["a.txt", "status.json", "sub/b.csv"]
    with pytest.raises(DownloadError, match="unknown dataset 'toy_2h'"):
        download_dataset("toy_2h", tmp_path / "raw" / "bare", required=True, mirror=mirror, registry=_toy())
    with pytest.raises(DownloadError, match="files_of is only for registry data"):
        download_dataset("toy_2h", tmp_path / "raw" / "s", required=True, source="synthetic", files_of="toy")


def test_status_is_byte_deterministic(tmp_path):
    mirror = _mirror(tmp_path / "mirror")
    for run in ("one", "two"):
        download_dataset("toy", tmp_path / run, required=True, mirror=mirror, registry=_toy())
    assert (tmp_path / "one/status.json").read_bytes() == (tmp_path / "two/status.json").read_bytes()


@pytest.mark.parametrize("xz", [False, True])
def test_corrupted_mirror_copy_fails_and_leaves_nothing(tmp_path, xz):
    corrupt = bytearray(FILES["sub/b.csv"])
    corrupt[3] ^= 0x01
    mirror = _mirror(tmp_path / "mirror", xz=xz)
    target = mirror / "toy" / ("sub/b.csv.xz" if xz else "sub/b.csv")
    if xz:  # flip one byte inside the compressed payload (past the 12-byte stream header)
        packed = bytearray(target.read_bytes())
        packed[20] ^= 0x01
        target.write_bytes(bytes(packed))
    else:
        target.write_bytes(bytes(corrupt))
    out = tmp_path / "raw" / "toy"
    out.mkdir(parents=True)
    (out / "status.json").write_text('{"available": true}')  # stale status from an earlier run
    with pytest.raises(ChecksumError) as info:
        download_dataset("toy", out, required=False, mirror=mirror, registry=_toy())
    message = str(info.value)
    assert "sub/b.csv" in message and _sha(FILES["sub/b.csv"]) in message
    if not xz:
        assert _sha(bytes(corrupt)) in message
    # a.txt was verified and written first in this call; it must be gone again, and no temp file remains
    assert _all_files(tmp_path / "raw") == []


def test_missing_required_dataset_says_how_to_supply_it(tmp_path, server):
    mirror = (tmp_path / "empty").resolve()
    mirror.mkdir()
    registry = _toy(f"{server.url}/missing")
    with pytest.raises(DataUnavailableError) as info:
        download_dataset("toy", tmp_path / "raw/toy", required=True, mirror=mirror, registry=registry)
    message = str(info.value)
    assert "\n" not in message
    assert "DATA_MIRROR" in message and "<dataset>/<file>[.xz]" in message
    for name in FILES:
        assert f"toy/{name}" in message and f"{server.url}/missing/{name}" in message
    assert "HTTP 404" in message and f"no copy in mirror {mirror}" in message
    assert _all_files(tmp_path / "raw") == []


def test_missing_optional_dataset_records_unavailable(tmp_path):
    mirror = _mirror(tmp_path / "mirror", files={"a.txt": FILES["a.txt"]})  # sub/b.csv is missing
    out = tmp_path / "raw" / "toy"
    status = download_dataset("toy", out, required=False, mirror=mirror, registry=_toy(_closed_port_url()))
    assert status == {"dataset": "toy", "available": False, "synthetic": False,
                      "reason": f"{UNAVAILABLE}: a.txt, sub/b.csv"}
    assert json.loads((out / "status.json").read_text()) == status
    assert _all_files(out) == ["status.json"]  # a.txt, fetched in this call, was removed again


def _unavailable_status(tmp_path: Path, run: str, mirror: Path, url: str | None) -> bytes:
    download_dataset("toy", tmp_path / run, required=False, mirror=mirror, registry=_toy(url))
    return (tmp_path / run / "status.json").read_bytes()


def test_unavailable_status_does_not_depend_on_the_machine(tmp_path, monkeypatch, server, caplog):
    # the same empty mirror, typed relative and absolute; the network failing in three different ways
    (tmp_path / "mirror").mkdir()
    monkeypatch.chdir(tmp_path)
    caplog.set_level("WARNING", logger="ppml.data.download")
    runs = {"relative-refused": (Path("mirror"), _closed_port_url()),
            "absolute-refused": (tmp_path / "mirror", _closed_port_url()),
            "absolute-404": (tmp_path / "mirror", f"{server.url}/missing"),
            "relative-no-url": (Path("mirror"), None)}
    statuses = {run: _unavailable_status(tmp_path, run, mirror, url) for run, (mirror, url) in runs.items()}
    assert len(set(statuses.values())) == 1, statuses
    text = statuses["absolute-404"].decode()
    assert json.loads(text)["reason"] == f"{UNAVAILABLE}: a.txt, sub/b.csv"
    for machine_dependent in (str(tmp_path), "mirror/", "127.0.0.1", "http", "404", "refused", "example.org"):
        assert machine_dependent not in text
    # where the files were looked for, and why that failed, is in the log instead
    logged = caplog.text
    assert f"no copy in mirror {tmp_path / 'mirror'}" in logged and "no copy in mirror mirror" in logged
    assert "HTTP 404" in logged and "no direct download (see https://example.org/toy)" in logged


def test_file_without_url_is_unavailable_without_network(tmp_path, caplog):
    caplog.set_level("WARNING", logger="ppml.data.download")
    status = download_dataset("toy", tmp_path / "raw", required=False, mirror=None, registry=_toy())
    assert status["available"] is False
    assert "no direct download (see https://example.org/toy)" in caplog.text


def test_origin_of_the_files_is_logged_not_recorded(tmp_path, server, caplog):
    caplog.set_level("INFO", logger="ppml.data.download")
    mirror = _mirror(tmp_path / "mirror")
    by_mirror = download_dataset("toy", tmp_path / "one", required=True, mirror=mirror, registry=_toy())
    by_url = download_dataset("toy", tmp_path / "two", required=True, registry=_toy(server.url))
    assert by_mirror == by_url
    assert (tmp_path / "one/status.json").read_bytes() == (tmp_path / "two/status.json").read_bytes()
    assert "toy: all 2 files verified (from mirror)" in caplog.text
    assert "toy: all 2 files verified (from url)" in caplog.text


def test_http_download_is_verified(tmp_path, server, caplog):
    caplog.set_level("INFO", logger="ppml.data.download")
    status = download_dataset("toy", tmp_path / "raw", required=True, registry=_toy(server.url))
    assert status["available"] and "(from url)" in caplog.text
    assert (tmp_path / "raw/sub/b.csv").read_bytes() == FILES["sub/b.csv"]
    assert sorted(server.requests) == ["/a.txt", "/sub/b.csv"]


def test_mirror_first_then_url(tmp_path, server, caplog):
    caplog.set_level("INFO", logger="ppml.data.download")
    mirror = _mirror(tmp_path / "mirror", files={"a.txt": FILES["a.txt"]})
    status = download_dataset("toy", tmp_path / "raw", required=True, mirror=mirror,
                              registry=_toy(server.url))
    assert status["available"] and "(from mirror+url)" in caplog.text
    assert server.requests == ["/sub/b.csv"]


def test_wrong_bytes_from_url_are_an_error_even_when_optional(tmp_path):
    srv = _Server({"a.txt": FILES["a.txt"], "sub/b.csv": b"id,x\n1,3\n"})
    try:
        with pytest.raises(ChecksumError, match=r"sub/b\.csv: sha256 mismatch .* expected [0-9a-f]{64}, got"):
            download_dataset("toy", tmp_path / "raw", required=False, registry=_toy(srv.url))
    finally:
        srv.close()
    assert _all_files(tmp_path / "raw") == []


def test_server_that_does_not_answer_times_out(tmp_path, server, caplog):
    caplog.set_level("WARNING", logger="ppml.data.download")
    registry = _toy(f"{server.url}/slow")
    start = time.monotonic()
    status = download_dataset("toy", tmp_path / "raw", required=False, registry=registry, timeout=0.3)
    assert time.monotonic() - start < 5
    assert status["available"] is False
    assert "no answer within the timeout of 0.3 s" in caplog.text


def test_present_verified_files_are_not_fetched_again(tmp_path, server, caplog):
    caplog.set_level("INFO", logger="ppml.data.download")
    out = tmp_path / "raw"
    download_dataset("toy", out, required=True, registry=_toy(server.url))
    (out / "sub/b.csv").write_bytes(b"tampered\n")
    server.requests.clear()
    caplog.clear()
    status = download_dataset("toy", out, required=True, registry=_toy(server.url))
    assert server.requests == ["/sub/b.csv"]  # a.txt was present and verified; the tampered file refetched
    assert status["available"] and "(from present+url)" in caplog.text
    assert (out / "sub/b.csv").read_bytes() == FILES["sub/b.csv"]


def test_synthetic_dataset_needs_no_registry_entry(tmp_path):
    status = download_dataset("tiny", tmp_path / "raw", required=True, source="synthetic", registry={})
    assert status == {"dataset": "tiny", "available": True, "synthetic": True, "source": "synthetic",
                      "files": {}}
    assert read_status(tmp_path / "raw") == status


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(DownloadError, match=r"unknown dataset 'nope' \(known: toy\)"):
        download_dataset("nope", tmp_path, required=True, registry=_toy())
    with pytest.raises(DownloadError, match=r"mirror .*absent is not a directory"):
        download_dataset("toy", tmp_path, required=True, mirror=tmp_path / "absent", registry=_toy())
    with pytest.raises(DownloadError,
                       match=r"source must be one of \['registry', 'synthetic', 'user'\], got 'ftp'"):
        download_dataset("toy", tmp_path, required=True, source="ftp", registry=_toy())
    with pytest.raises(FileNotFoundError, match="status.json"):
        read_status(tmp_path / "nothing")


def _mirror_root() -> Path | None:
    root = Path(os.environ.get("DATA_MIRROR") or REPO.parent / "shared" / "datasets")
    return root if (root / "arcene").is_dir() else None


@pytest.mark.skipif(_mirror_root() is None, reason="no dataset mirror (set DATA_MIRROR)")
def test_real_mirror_copy_of_arcene_matches_the_registry(tmp_path):
    status = download_dataset("arcene", tmp_path / "arcene", required=True, mirror=_mirror_root())
    assert status["available"] and status["source"] == "registry"
    assert sorted(status["files"]) == sorted(f.name for f in DATASETS["arcene"].files)


GIVE_CREDIT = """seed: 0
datasets:
  give_credit:
    partition: vertical
    parties: [guest, host]
    normalize: fate_zscore
    reader: give_credit
    split: [5, 5]
    label_holder: guest
    alignment: plain
    private_fraction: 0.01
    test_fraction: 0.2
"""


def _stage(tmp_path: Path, params: str, dataset: str, mirror: Path) -> subprocess.CompletedProcess:
    (tmp_path / "params.yaml").write_text(params)
    env = {**os.environ, "DATA_MIRROR": str(mirror)}
    return subprocess.run([sys.executable, str(REPO / "stages" / "download.py"), "--dataset", dataset,
                           "--params", "params.yaml", "--out", f"data/raw/{dataset}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_stage_fails_in_one_line_for_a_required_dataset(tmp_path):
    (tmp_path / "mirror").mkdir()
    # give_credit has no direct URL, so nothing here touches the network; required is the default
    result = _stage(tmp_path, GIVE_CREDIT, "give_credit", Path("mirror"))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    message = result.stderr.strip().splitlines()[-1]  # after the INFO log lines
    assert message.startswith("download@give_credit: dataset 'give_credit' is not available")
    assert "no copy in mirror mirror" in message and "give_credit/cs-training.csv" in message
    assert "network" not in message  # the file has no URL to allow access to
    assert not (tmp_path / "data/raw/give_credit").exists()


def test_stage_records_an_optional_dataset_and_validates_params(tmp_path):
    (tmp_path / "mirror").mkdir()
    result = _stage(tmp_path, GIVE_CREDIT + "    required: false\n", "give_credit", Path("mirror"))
    assert result.returncode == 0, result.stderr
    assert read_status(tmp_path / "data/raw/give_credit")["available"] is False
    result = _stage(tmp_path, GIVE_CREDIT + "    required: maybe\n", "give_credit", Path("mirror"))
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "download@give_credit: datasets.give_credit.required must be true or false, got 'maybe'")
