"""The Spark driver's class-data archive: mapped when this installation has one, else written by
the JVM as it exits and installed only when the JVM ended well (real processes stand in for it)."""

import os
import subprocess
import time

from results import spark
from results.spark import STALE_ARCHIVE_S, ClassArchive, class_archive


def test_off_means_no_option(monkeypatch):
    monkeypatch.setenv("SURGE_SPARK_CLASS_CACHE", "off")
    assert class_archive().option == "" and not class_archive().writing


def test_a_missing_archive_is_written_to_a_file_of_this_process(monkeypatch, tmp_path):
    monkeypatch.setenv("SURGE_SPARK_CLASS_CACHE", str(tmp_path))
    stale, fresh = tmp_path / "spark-0.1.partial", tmp_path / "spark-0.2.partial"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (time.time() - STALE_ARCHIVE_S - 60,) * 2)
    archive = class_archive()
    assert archive.writing and archive.partial.parent == tmp_path
    assert str(os.getpid()) in archive.partial.name
    assert archive.option == f'-XX:ArchiveClassesAtExit="{archive.partial}"'
    assert not stale.exists() and fresh.exists()  # another process may still be writing it
    archive.path.write_bytes(b"archive")
    mapped = class_archive()
    assert not mapped.writing and mapped.option == f'-XX:SharedArchiveFile="{archive.path}"'


def jvm(exit_code: int) -> subprocess.Popen:
    """A process that waits for its input to close, then exits with ``exit_code``."""
    return subprocess.Popen(["sh", "-c", f"cat >/dev/null; exit {exit_code}"],
                            stdin=subprocess.PIPE)


def test_an_archive_is_installed_when_the_jvm_ended_well(tmp_path):
    archive = ClassArchive(tmp_path / "spark-new.jsa", tmp_path / "spark-new.7.partial")
    old = tmp_path / "spark-old.jsa"
    old.write_bytes(b"old")
    archive.partial.write_bytes(b"classes")
    archive.install(jvm(0))
    assert archive.path.read_bytes() == b"classes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spark-new.jsa"]


def test_installing_leaves_this_processs_session_running(tmp_path, monkeypatch):
    """Only the exit hook stops the session: a suite's shared session outlives this test."""
    stopped = []

    class Session:
        def stop(self):
            stopped.append(self)

    monkeypatch.setitem(spark._started, "session", Session())
    archive = ClassArchive(tmp_path / "spark-new.jsa", tmp_path / "spark-new.7.partial")
    archive.partial.write_bytes(b"classes")
    archive.install(jvm(0))
    assert stopped == [] and archive.path.exists()
    spark._stop_and_install(archive, jvm(0))
    assert len(stopped) == 1 and "session" not in spark._started


def test_a_failed_or_empty_archive_is_removed(tmp_path):
    archive = ClassArchive(tmp_path / "spark-new.jsa", tmp_path / "spark-new.7.partial")
    archive.partial.write_bytes(b"half")
    archive.install(jvm(1))
    archive.partial.write_bytes(b"")
    archive.install(jvm(0))
    assert list(tmp_path.iterdir()) == []
