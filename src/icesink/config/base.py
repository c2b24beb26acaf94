"""What every config section shares: the pydantic base, and names safe to put in a table, column
or catalog name."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _plain_identifier(v: str) -> str:
    if not IDENTIFIER.match(v):
        raise ValueError("must be a plain identifier")
    return v


# A name that becomes part of a table, column or catalog name: no dots, quotes or path tricks.
Identifier = Annotated[str, AfterValidator(_plain_identifier)]


class Section(BaseModel):
    """A config section: unknown keys are errors, and a loaded config never changes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
