"""What a non-editable install gets: the wheel carries the TUI's stylesheet (package data) and the themes
(data files under <prefix>/share/cockpit/themes, where cockpit.tui.themes looks when there is no checkout)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from helpers import REPO


def test_the_wheel_carries_the_stylesheet_and_the_themes(tmp_path):
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ and egg-info there
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "cockpit", "themes"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is
                                          shutil.copytree else {}))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    [wheel] = (tmp_path / "dist").glob("cockpit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "cockpit/tui/app.tcss" in names
    themes = {n.rsplit("/", 1)[1] for n in names if "/data/share/cockpit/themes/" in n}
    assert themes == {p.name for p in (REPO / "themes").glob("*.yaml")} and {"dark.yaml", "light.yaml"} <= themes
