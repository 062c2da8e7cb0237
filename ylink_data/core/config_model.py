"""What every YAML section's model shares (the pipeline's, the mixture's, the input section's in
io/input_config.py): unknown keys refused, defaults validated, no blank paths."""
from __future__ import annotations

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

MiB = 1024 * 1024


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def not_blank(what: str) -> AfterValidator:
    """An empty path names the working directory: `--set input.paths=` read it recursively, and
    `--set output.path=` made it the output folder."""
    def check(path: str) -> str:
        if not path.strip():
            raise PydanticCustomError("empty_path", f"empty path: name {what}")
        return path
    return AfterValidator(check)
