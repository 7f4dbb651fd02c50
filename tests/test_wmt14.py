"""The WMT'14 recipe against a local HTTP server that serves small archives of the real
shape (same file names, same inner paths, SGM test set): download, resume, checksums,
extraction, layout, subsampling, and the one-line errors of train.py."""

import dataclasses
import gzip
import hashlib
import http.server
import io
import tarfile
import threading

import pytest

from keras_nmt.cli import train as train_cli
from keras_nmt.corpus import wmt14
from keras_nmt.core.errors import DownloadError

LINES = {"europarl-v7": 7, "commoncrawl": 5, "un": 6, "news-commentary-v9": 4, "giga-fren": 8,
         "newstest2012": 3, "newstest2013": 2}


def corpus_lines(corpus, lang):
    return [f"{corpus} {lang} sentence {i} ." for i in range(LINES[corpus])]


def sgm(lang, kind):
    segments = [f"Tom &amp; Jerry {lang} {i} &lt;3 l&apos;été" for i in range(3)]
    body = "".join(f'<seg id="{i + 1}">{text}</seg>\n' for i, text in enumerate(segments))
    return (f'<{kind}set setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="d1">\n'
            f"<p>\n{body}</p>\n</doc>\n</{kind}set>\n").encode()


def member_bytes(corpus, lang, member):
    if member.endswith(".sgm"):
        return sgm(lang, "src" if "-src." in member else "ref")
    data = "".join(line + "\n" for line in corpus_lines(corpus, lang)).encode()
    return gzip.compress(data, mtime=0) if member.endswith(".gz") else data


def make_archive(archive):
    buffer = io.BytesIO()
    mode = "w" if archive.filename.endswith(".tar") else "w:gz"
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        extra = tarfile.TarInfo("README")  # a member the recipe does not need
        tar.addfile(extra, io.BytesIO(b""))
        for corpus, members in archive.members.items():
            for lang, member in zip(wmt14.LANGS, members):
                data = member_bytes(corpus, lang, member)
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def archives():
    """File name -> (bytes, manifest entry with the generated file's size and digest)."""
    out = {}
    for archive in wmt14.MANIFEST:
        data = make_archive(archive)
        entry = dataclasses.replace(archive, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        out[archive.filename] = (data, entry)
    return out


class Mirror:
    """A local HTTP server: serves ``files``, honours Range, can cut a file's first
    response half-way, and records every request (name, Range header)."""

    def __init__(self, files):
        self.files = dict(files)
        self.cut_once = set()
        self.requests = []
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                mirror.requests.append((name, self.headers.get("Range")))
                data = mirror.files.get(name)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = 0
                if self.headers.get("Range"):
                    start = int(self.headers["Range"].split("=")[1].rstrip("-"))
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if name in mirror.cut_once:
                    mirror.cut_once.discard(name)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/wmt"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror(archives):
    server = Mirror({name: data for name, (data, _) in archives.items()})
    yield server
    server.close()


@pytest.fixture
def manifest(archives):
    return [entry for _, entry in archives.values()]


def read_lines(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_full_prepare_from_a_local_mirror(tmp_path, mirror, manifest):
    out = wmt14.prepare(tmp_path, mirror.url, manifest=manifest, log=lambda text: None, quiet=True)
    assert out == tmp_path / "wmt14-en-fr" / "prepared"
    for lang in wmt14.LANGS:
        train = [line for corpus in wmt14.SPLITS["train"] for line in corpus_lines(corpus, lang)]
        assert read_lines(out / f"train.{lang}") == train
        assert read_lines(out / f"valid.{lang}") == (
            corpus_lines("newstest2012", lang) + corpus_lines("newstest2013", lang))
        assert read_lines(out / f"test.{lang}") == [f"Tom & Jerry {lang} {i} <3 l'été" for i in range(3)]
    assert sorted(name for name, _ in mirror.requests) == sorted(a.filename for a in manifest)
    # Prepared once: a second call downloads nothing.
    mirror.requests.clear()
    assert wmt14.prepare(tmp_path, mirror.url, manifest=manifest, log=lambda text: None) == out
    assert mirror.requests == []


def test_subsample_is_deterministic_and_keeps_file_order(tmp_path, mirror, manifest):
    out = wmt14.prepare(tmp_path, mirror.url, max_train_pairs=10, manifest=manifest,
                        log=lambda text: None, quiet=True)
    assert out.name == "prepared-10"
    full = [line for corpus in wmt14.SPLITS["train"] for line in corpus_lines(corpus, "en")]
    sample = read_lines(out / "train.en")
    assert len(sample) == 10 and len(set(sample)) == 10
    assert sample == [line for line in full if line in set(sample)]  # in corpus order
    assert [line.replace(" en ", " fr ") for line in sample] == read_lines(out / "train.fr")
    again = wmt14.prepare(tmp_path / "other", mirror.url, max_train_pairs=10, manifest=manifest,
                          log=lambda text: None, quiet=True)
    assert read_lines(again / "train.en") == sample
    assert sum(wmt14.subsample_mask(1000, 100)) == 100
    assert wmt14.subsample_mask(1000, 100) != wmt14.subsample_mask(1000, 100, seed=1)


def test_interrupted_download_resumes_with_a_range_request(tmp_path, mirror, archives):
    data, entry = archives["training-parallel-europarl-v7.tgz"]
    mirror.cut_once.add(entry.filename)
    path = wmt14.download(entry, tmp_path, mirror.url, quiet=True)
    assert path.read_bytes() == data
    ranges = [r for name, r in mirror.requests if name == entry.filename]
    assert ranges[0] is None and ranges[1] == f"bytes={len(data) // 2}-"
    assert not path.with_name(path.name + ".part").exists()

    # A partial file left by an earlier process is continued, not restarted.
    other_data, other = archives["dev.tgz"]
    part = tmp_path / "dev.tgz.part"
    part.write_bytes(other_data[:100])
    mirror.requests.clear()
    assert wmt14.download(other, tmp_path, mirror.url, quiet=True).read_bytes() == other_data
    assert mirror.requests == [("dev.tgz", "bytes=100-")]


def test_a_file_that_fails_its_checksum_is_not_used(tmp_path, mirror, manifest):
    bad = [dataclasses.replace(a, sha256="0" * 64) if a.filename == "dev.tgz" else a for a in manifest]
    with pytest.raises(DownloadError, match=r"dev\.tgz has SHA-256 [0-9a-f]{64}, expected 0{64}; it was not used"):
        wmt14.prepare(tmp_path, mirror.url, manifest=bad, log=lambda text: None, quiet=True)
    downloads = tmp_path / "wmt14-en-fr" / "downloads"
    assert not (downloads / "dev.tgz").exists() and (downloads / "dev.tgz.rejected").exists()
    assert not (tmp_path / "wmt14-en-fr" / "prepared").exists()


def test_wmt14_command_prints_the_prepared_directory_and_quiet_keeps_stderr_empty(
        tmp_path, mirror, manifest, monkeypatch):
    from keras_nmt.cli import wmt14 as wmt14_cli

    monkeypatch.setattr(wmt14, "MANIFEST", tuple(manifest))
    for quiet in (True, False):
        stdout, stderr = io.StringIO(), io.StringIO()
        cache = tmp_path / f"quiet-{quiet}"
        assert wmt14_cli.main(["--cache-dir", str(cache), "--mirror", mirror.url,
                               *["--quiet"] * quiet], stdout=stdout, stderr=stderr) == 0
        assert stdout.getvalue() == f"{cache / wmt14.NAME / 'prepared'}\n"
        assert (stderr.getvalue() == "") == quiet, stderr.getvalue()


def run_cli(capsys, *args):
    status = train_cli.main(["--data", "wmt14-en-fr", "--quiet", *args])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert lines[0].startswith("keras-nmt train: error: ") and "Traceback" not in lines[0]
    return lines[0]


def test_train_cli_errors_name_the_files_to_place_by_hand(tmp_path, capsys, mirror,
                                                          monkeypatch):
    # Without --out a run goes to runs/VARIANT-TIME under the working directory: a
    # failed start leaves neither the run nor the runs/ folder it made.
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    cache = tmp_path / "cache"
    downloads = cache / "wmt14-en-fr" / "downloads"
    # Against the real manifest, every small file fails its size check.
    line = run_cli(capsys, "--cache-dir", str(cache), "--mirror", mirror.url, "--out", str(tmp_path / "run"))
    assert "training-parallel-europarl-v7.tgz has" in line and "expected 657632379; it was not used" in line
    assert f"place the files by hand in {downloads} (training-parallel-europarl-v7.tgz, " in line
    assert "or pass --data DIR" in line
    assert not (tmp_path / "run").exists()

    mirror.files.clear()  # 404
    line = run_cli(capsys, "--cache-dir", str(cache), "--mirror", mirror.url)
    assert "training-parallel-europarl-v7.tgz: HTTP 404" in line and "training-giga-fren.tar" in line
    mirror.close()  # server down
    line = run_cli(capsys, "--cache-dir", str(cache), "--mirror", mirror.url)
    assert "cannot download" in line and "Connection refused" in line and "by hand" in line
    assert list(work.iterdir()) == []
    (work / "runs").mkdir()  # a runs/ that was there before stays
    run_cli(capsys, "--cache-dir", str(cache), "--mirror", mirror.url)
    assert list(work.iterdir()) == [work / "runs"] and list((work / "runs").iterdir()) == []


@pytest.mark.end_to_end
def test_train_from_the_recipe(tmp_path, mirror, manifest, monkeypatch):
    from keras_nmt.runner import experiment
    from keras_nmt.runner.train_options import TrainOptions

    monkeypatch.setattr(wmt14, "MANIFEST", tuple(manifest))
    monkeypatch.setenv(wmt14.MIRROR_ENV, mirror.url)
    monkeypatch.setenv(wmt14.CACHE_ENV, str(tmp_path / "cache"))
    summary = experiment.train(TrainOptions(
        variant="search30", data="wmt14-en-fr", out=str(tmp_path / "run"), max_steps=1,
        max_train_pairs=20, quiet=True,
        overrides={"embedding": 8, "hidden": 8, "attention": 8, "maxout": 4, "batch_size": 8,
                   "beam_size": 1, "shuffle_buffer": 50},
    ))
    assert summary["data"]["corpus"] == str(tmp_path / "cache" / "wmt14-en-fr" / "prepared-20")
    assert summary["data"]["train"]["pairs"] == 20
    assert summary["held_out"]["split"] == "test" and summary["held_out"]["sentences"] == 3
