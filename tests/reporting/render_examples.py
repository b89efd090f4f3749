"""Write every report of the synthetic run and, with headless Chromium, PNGs of the matrix and a timeline.

    python -m tests.reporting.render_examples /tmp/example-reports [--matrix-png docs/images/matrix-example.png]

Used to look at the reports by eye and to refresh the README picture; not a test.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from conformance.reporting import parse_catalogue, render_timeline, write_reports
from tests.reporting import synthetic

_CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def screenshot(page: Path, png: Path, *, width: int, height: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        raise SystemExit("no chromium on PATH (apt-get install -y chromium)")
    png.parent.mkdir(parents=True, exist_ok=True)
    cmd = [chromium, *_CHROMIUM_FLAGS, f"--screenshot={png.resolve()}", f"--window-size={width},{height}", page.resolve().as_uri()]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--matrix-png", type=Path, help="also copy the matrix screenshot here")
    args = parser.parse_args(argv)

    out: Path = args.out_dir
    paths = write_reports(events=synthetic.events(), out_dir=out, catalogue=parse_catalogue(synthetic.CATALOGUE_YAML))
    failed = next(r for r in synthetic.results() if r.outcome.value == "FAILED")
    timeline = out / "timeline-example.svg"
    timeline.write_text(render_timeline(failed.transcript, title=f"{failed.scenario} on {failed.pair}: FAILED"), encoding="utf-8")

    screenshot(paths["matrix_html"], out / "matrix.png", width=1010, height=800)
    screenshot(timeline, out / "timeline-example.png", width=1080, height=640)
    if args.matrix_png:
        args.matrix_png.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / "matrix.png", args.matrix_png)
    for name in ("matrix.png", "timeline-example.png"):
        sys.stdout.write(f"{out / name}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
