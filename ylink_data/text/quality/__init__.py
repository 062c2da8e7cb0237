"""Quality classifiers: fastText models that score how much a document reads like curated text
(news, books) rather than web spam and boilerplate. `ylink_data.train.quality` makes one (`ylink quality
train`; the learning is `train` here), `QualityModel` loads one and scores batches; `preprocess` is what both feed the model."""
from __future__ import annotations

from ylink_data.text.quality.model import QualityModel
from ylink_data.text.quality.preprocess import model_line, model_lines

__all__ = ["QualityModel", "model_line", "model_lines"]
