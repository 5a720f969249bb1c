"""The crash suite shares the compatibility suite's broker processes and helpers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
