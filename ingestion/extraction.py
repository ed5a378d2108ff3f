"""Text out of downloaded files: a PDF's text layer (pypdf); images and scanned PDFs through
Tesseract (PDF pages rendered by pdftoppm first); and the quality gate that sends poor text to review."""

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from pypdf import PdfReader
from pypdf.errors import PyPdfError

from ingestion.stopping import NEVER, Stopped

IMAGE_MAGIC = {
    b"\x89PNG": "png",
    b"\xff\xd8\xff": "jpeg",
    b"II*\x00": "tiff",
    b"MM\x00*": "tiff",
    b"GIF8": "gif",
    b"BM": "bmp",
}

# subprocess.run, or a job's run_subprocess (which takes Popen's arguments: no capture_output).
Runner = Callable[..., subprocess.CompletedProcess]


class OcrUnavailable(Exception):
    """Tesseract (or pdftoppm, for scanned PDFs) is not installed here."""


class ExtractionError(Exception):
    """The file cannot be read (damaged, or not what it claims to be)."""


def file_kind(path: Path) -> str:
    """``pdf``, an image format, or ``other``, from the file's first bytes."""
    with path.open("rb") as file:
        head = file.read(8)
    if head.startswith(b"%PDF"):
        return "pdf"
    for magic, kind in IMAGE_MAGIC.items():
        if head.startswith(magic):
            return kind
    return "other"


def extract_text(
    path: Path, kind: str, *, run: Runner = subprocess.run, stop: threading.Event = NEVER
) -> tuple[str, str]:
    """The file's text and how it was read (``text_layer`` or ``ocr``). Between pages, a set
    ``stop`` raises Stopped (a job's ``run`` kills its subprocess at once)."""
    if kind == "pdf":
        text = _text_layer(path, stop)
        if _letters(text) >= settings.INGESTION_MIN_TEXT_CHARS:
            return text, "text_layer"
        return _ocr_pdf(path, run, stop), "ocr"  # a scan, or a page without text
    if kind in IMAGE_MAGIC.values():
        return _tesseract(path, run), "ocr"
    raise ExtractionError(f"no text can be read from a file of kind {kind}")


def review_reason(text: str) -> str | None:
    """Why the text needs a person to look at it, or None if it passes."""
    letters = _letters(text)
    if letters < settings.INGESTION_MIN_TEXT_CHARS:
        return f"too little text ({letters} letters)"
    visible = sum(not char.isspace() for char in text)
    if letters / visible < settings.INGESTION_MIN_LETTER_SHARE:
        return f"mostly not letters ({letters} of {visible} characters)"
    return None


def _letters(text: str) -> int:
    return sum(char.isalpha() for char in text)


def _checked(stop: threading.Event) -> None:
    if stop.is_set():
        raise Stopped("stopped while reading the document")


def _text_layer(path: Path, stop: threading.Event) -> str:
    texts = []
    try:
        for page in PdfReader(path).pages[: settings.INGESTION_OCR_MAX_PAGES]:
            _checked(stop)
            texts.append(page.extract_text() or "")
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"unreadable PDF: {type(exc).__name__}") from None
    return "\n".join(texts)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise OcrUnavailable(f"{name} is not installed")
    return found


def _tesseract(image: Path, run: Runner) -> str:
    result = run(
        [_tool("tesseract"), str(image), "stdout"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=settings.INGESTION_OCR_TIMEOUT_SEC,
        # One core per page: a worker OCRs as many pages at once as its slots, and Tesseract's own
        # threads (one per core) would make them fight over the CPUs (Tesseract's advice).
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    )
    if result.returncode != 0:
        raise ExtractionError(f"tesseract failed: {result.stderr.decode(errors='replace').strip()[:200]}")
    return result.stdout.decode(errors="replace")


def _ocr_pdf(path: Path, run: Runner, stop: threading.Event) -> str:
    _tool("tesseract")  # both are needed: checked before any work
    pdftoppm = _tool("pdftoppm")
    with tempfile.TemporaryDirectory(prefix="ocr-") as pages:
        result = run(
            [pdftoppm, "-r", "200", "-png", "-l", str(settings.INGESTION_OCR_MAX_PAGES), str(path), f"{pages}/page"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=settings.INGESTION_OCR_TIMEOUT_SEC,
        )
        if result.returncode != 0:
            raise ExtractionError(f"pdftoppm failed: {result.stderr.decode(errors='replace').strip()[:200]}")
        texts = []
        for page in sorted(Path(pages).glob("page*.png")):
            _checked(stop)
            texts.append(_tesseract(page, run))
        return "\n".join(texts)
