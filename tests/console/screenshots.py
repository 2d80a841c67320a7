"""Screenshots of the console's main pages as small palette PNGs.

``python -m tests.console.screenshots [OUT_DIR]`` (default ``docs/img``)
starts ``noisyloop serve``, creates a tenant with a model that learns from a
simulated noisy stream (long enough for its noise rates to be estimated and
published) and a rank model fed a simulated recommender stream,
signs in with the tenant's key in the system's headless Chromium and writes
``console-models.png`` (the models list) and ``console-model.png`` (the model
page).  The console tests take the same
pictures and check their size.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

from app.replay.output import FIGURE_COLOURS
from tests.console.harness import (
    NOISY_PARAMS,
    RANK_SHAPE,
    launch_browser,
    run_service,
    sign_in,
)

#: Width of the saved pictures (the page is drawn at 1280 px, then scaled down).
WIDTH = 900
#: Colours of the models list (text and a table: half the figures' keeps it legible).
LIST_COLOURS = FIGURE_COLOURS // 2


def save_small(png: bytes, path: Path, colours: int = FIGURE_COLOURS) -> Path:
    """``png`` scaled to :data:`WIDTH` and saved as a palette PNG of ``colours`` colours."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    height = round(image.height * WIDTH / image.width)
    image = image.resize((WIDTH, height), Image.Resampling.LANCZOS).quantize(
        colors=colours, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG", optimize=True)
    return path


def capture(page: Any, base: str, token: str, model_id: str, out_dir: Path) -> list[Path]:
    """Sign in, then picture the models list and the top of ``model_id``'s page."""
    page.set_viewport_size({"width": 1280, "height": 720})
    sign_in(page, base, token)
    table = page.wait_for_selector("table.models")
    # down to the models card (the rest of the page is empty)
    box = table.bounding_box()
    models = save_small(page.screenshot(clip={"x": 0, "y": 0, "width": 1280,
                                              "height": box["y"] + box["height"] + 40}),
                        out_dir / "console-models.png", LIST_COLOURS)
    page.goto(f"{base}/console#/models/{model_id}")
    page.wait_for_selector("#reward-chart svg polyline")
    page.wait_for_selector("#noise-chart svg")
    page.wait_for_selector("#noise-now")
    page.wait_for_selector("#versions .body :is(table, p)")
    model = save_small(page.screenshot(), out_dir / "console-model.png")
    return [models, model]


def main(out_dir: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, run_service(Path(tmp) / "data") as service:
        auth = service.tenant("acme")
        service.model(auth, "clicks", params=NOISY_PARAMS)
        service.model(auth, "ranker", task="rank", algorithm="ridge_pl", n_classes=None,
                      **RANK_SHAPE)
        service.learn(auth, "clicks")
        service.rank_stream(auth, "ranker", rounds=3)
        with launch_browser() as browser:
            page = browser.new_page()
            for path in capture(page, service.base, auth["Authorization"].split()[1], "clicks",
                                out_dir):
                print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
