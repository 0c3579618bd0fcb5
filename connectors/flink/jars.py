"""The jars a Flink job of ours needs beyond PyFlink itself, and how to get them.

PyFlink ships without the Kafka connector, and the connector's Python wrappers only read and
write record values. Two jars from a wheel (the connector and kafka-clients) plus a small helper
jar of our own (``java/io/eddies/flink``: whole records in, whole records out) close that gap.
The helper is compiled here on first use rather than shipped as a binary, so the source in the
repository is the only truth about what runs inside the JVM.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

RECORDS_JAR = "eddies-flink-records.jar"
CONNECTOR_WHEEL = "shigawire-apache-flink-libraries==2.0.0.post1"
CONNECTOR_PREFIXES = ("flink-connector-kafka", "kafka-clients")
JAVA_RELEASE = "11"
_Writer = Callable[[Path], object]

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
# The manifest attribute that ties a built jar to the sources it came from: a stale jar is
# found by content, not by file times, which copies and checkouts do not keep.
STAMP_ATTRIBUTE = "Eddies-Sources-SHA256"


class FlinkSetupError(RuntimeError):
    """Something the Flink runner needs outside Python is missing; the message says how to get it."""


def pyflink_lib() -> Path:
    """PyFlink's own jars (flink-dist and friends), which the helper compiles against.

    Imported lazily: PyFlink is an optional, heavy dependency that ``import eddies`` must not pay for.
    """
    try:
        import pyflink  # type: ignore[import-untyped]
    except ImportError as error:
        raise FlinkSetupError("the Flink runner needs PyFlink: pip install apache-flink==2.3.0") from error
    return Path(pyflink.__file__).parent / "lib"


def connector_jars(directory: Path) -> list[Path]:
    """The Kafka connector jars in `directory`, whatever their version suffix.

    Failing here, before a JVM starts, turns a ClassNotFoundException deep in a job log into a
    message that says what to install.
    """
    found: list[Path] = []
    missing: list[str] = []
    for prefix in CONNECTOR_PREFIXES:
        candidates = sorted(directory.glob(f"{prefix}*.jar")) if directory.is_dir() else []
        if candidates:
            found.append(candidates[-1])
        else:
            missing.append(f"{prefix}.jar")
    if missing:
        raise FlinkSetupError(
            f"{' and '.join(missing)} not found in {directory}: run `make install-flink`, or "
            f"`pip install --no-deps --target TMP {CONNECTOR_WHEEL}` and copy "
            f"TMP/pyflink/lib/flink-connector-kafka.jar and TMP/pyflink/lib/kafka-clients.jar "
            f"into {directory}"
        )
    return found


def install_connector_jars(directory: Path, python: str) -> None:
    """Fetch the two connector jars into `directory`.

    The wheel carries ~50 Flink 2.0 jars; installing it into the environment would put them
    beside PyFlink 2.3's own, so it goes to a throwaway directory and only two jars are kept.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eddies-flink-wheel-") as scratch:
        command = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--target", scratch]
        command.append(CONNECTOR_WHEEL)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise FlinkSetupError(f"`{' '.join(command)}` failed: {tail[0]}")
        lib = Path(scratch) / "pyflink" / "lib"
        for prefix in CONNECTOR_PREFIXES:
            source = lib / f"{prefix}.jar"
            if not source.is_file():
                raise FlinkSetupError(f"{CONNECTOR_WHEEL} no longer carries pyflink/lib/{source.name}")
            _publish(directory, source.name, partial(shutil.copyfile, source))


def records_jar(directory: Path) -> Path:
    """The helper jar in `directory`, rebuilt when the Java sources changed since it was built.

    A prebuilt jar is used as it is when no sources are at hand (an install without them) or
    when its stamp matches them, so machines without a JDK can run jobs built elsewhere.
    """
    target = directory / RECORDS_JAR
    sources = _java_sources()
    if not sources:
        if target.is_file():
            return target
        raise FlinkSetupError(f"no {RECORDS_JAR} in {directory} and no Java sources under {JAVA_SOURCES}")
    stamp = _sources_stamp(sources)
    if target.is_file() and _jar_stamp(target) == stamp:
        return target
    javac = shutil.which("javac")
    if javac is None:
        state = "is stale" if target.is_file() else "is missing"
        raise FlinkSetupError(
            f"{target} {state} and javac is not on PATH: install a JDK {JAVA_RELEASE}+ to build "
            f"the small helper jar once, or put a prebuilt {RECORDS_JAR} in {directory}"
        )
    classpath = [*sorted(pyflink_lib().glob("*.jar")), *connector_jars(directory)]
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eddies-flink-javac-", dir=directory) as scratch:
        classes = Path(scratch) / "classes"
        command = [
            javac,
            "--release",
            JAVA_RELEASE,
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-cp",
            os.pathsep.join(str(jar) for jar in classpath),
            "-d",
            str(classes),
            *(str(source) for source in sources),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise FlinkSetupError(f"javac failed building {RECORDS_JAR}:\n{done.stderr or done.stdout}")
        _publish(directory, RECORDS_JAR, partial(_write_jar, classes=classes, stamp=stamp))
    return target


def _java_sources() -> list[Path]:
    return sorted(JAVA_SOURCES.rglob("*.java")) if JAVA_SOURCES.is_dir() else []


def _sources_stamp(sources: list[Path]) -> str:
    digest = hashlib.sha256(f"release {JAVA_RELEASE}\n".encode())
    for source in sources:
        digest.update(source.relative_to(JAVA_SOURCES).as_posix().encode() + b"\0")
        digest.update(source.read_bytes() + b"\0")
    return digest.hexdigest()


def _jar_stamp(jar: Path) -> str | None:
    """The sources stamp in a jar's manifest; None for a jar that is unreadable or has none."""
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    for line in manifest.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == STAMP_ATTRIBUTE:
            return value.strip()
    return None


def _write_jar(jar: Path, classes: Path, stamp: str) -> None:
    """Zip the classes with fixed entry times, so equal sources give an equal jar."""
    manifest = f"Manifest-Version: 1.0\r\nCreated-By: eddies\r\n{STAMP_ATTRIBUTE}: {stamp}\r\n\r\n"
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF", (1980, 1, 1, 0, 0, 0)), manifest)
        for path in sorted(classes.rglob("*.class")):
            entry = zipfile.ZipInfo(path.relative_to(classes).as_posix(), (1980, 1, 1, 0, 0, 0))
            archive.writestr(entry, path.read_bytes(), zipfile.ZIP_DEFLATED)


def _publish(directory: Path, name: str, write: _Writer) -> None:
    """Write to a temporary name in `directory` and rename: a racing reader sees the old file or the new."""
    handle, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    os.close(handle)
    try:
        write(Path(temporary))
        os.chmod(temporary, 0o644)  # mkstemp makes it private; other users run jobs from it too
        os.replace(temporary, directory / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    """``python -m eddies.connectors.flink.jars DIR``: the Makefile's install-flink, one idempotent step."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m eddies.connectors.flink.jars DIR", file=sys.stderr)
        return 2
    directory = Path(args[0])
    try:
        try:
            jars = connector_jars(directory)
            print(f"connector jars present: {', '.join(jar.name for jar in jars)}")
        except FlinkSetupError:
            print(f"installing {CONNECTOR_WHEEL} jars into {directory}")
            install_connector_jars(directory, sys.executable)
            jars = connector_jars(directory)
            print(f"installed: {', '.join(jar.name for jar in jars)}")
        before = _jar_stamp(directory / RECORDS_JAR)
        helper = records_jar(directory)
        print(f"{'up to date' if _jar_stamp(helper) == before else 'built'}: {helper}")
    except FlinkSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
