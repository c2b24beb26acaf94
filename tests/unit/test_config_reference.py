from __future__ import annotations

from pathlib import Path

from icesink.config import Config
from icesink.config.reference import END, START, render


def test_readme_carries_the_generated_config_reference() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme[readme.index(START) : readme.index(END) + len(END)]
    assert block == render(), "README's config reference is stale: python -m icesink.config.reference"


def test_every_leaf_key_is_documented() -> None:
    text = render()
    for section in ("job", "kafka", "catalog", "s3", "tables", "spark"):
        assert f"| `{section}." in text
    assert "| `job.trigger.mode` |" in text
    assert "Field(" not in text
    assert all(f.description for f in Config.model_fields["kafka"].annotation.model_fields.values())  # type: ignore[union-attr]
