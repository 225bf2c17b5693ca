"""Image files as explorer inputs: read with QImage as (1, C, H, W) in [0, 1], matched to the
model's declared sample shape; unreadable files get one sentence."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage

from gradviz.core.common.errors import GradvizError
from gradviz.gui.pages.explorer.image_inputs import read_image


def _save_rgb(path, pixels: np.ndarray) -> None:
    height, width, _ = pixels.shape
    image = QImage(pixels.tobytes(), width, height, 3 * width, QImage.Format.Format_RGB888)
    assert image.save(str(path))


def test_an_rgb_png_is_one_sample_of_its_pixels_in_zero_to_one(qapp, tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    _save_rgb(tmp_path / "p.png", pixels)
    sample = read_image(str(tmp_path / "p.png"))
    assert sample.shape == (1, 3, 5, 7) and sample.dtype == np.float64
    np.testing.assert_array_equal(sample[0], pixels.transpose(2, 0, 1) / 255.0)


def test_the_image_is_converted_to_the_models_sample_shape(qapp, tmp_path):
    pixels = np.full((8, 8, 3), 200, dtype=np.uint8)
    _save_rgb(tmp_path / "p.png", pixels)
    grey = read_image(str(tmp_path / "p.png"), in_shape=(1, 4, 6))
    assert grey.shape == (1, 1, 4, 6)
    np.testing.assert_allclose(grey, 200 / 255.0, atol=1 / 255.0)  # a uniform grey stays so


def test_a_file_that_is_not_an_image_gets_one_sentence(qapp, tmp_path):
    (tmp_path / "notes.png").write_text("not a picture")
    with pytest.raises(GradvizError, match="is not an image Qt can read"):
        read_image(str(tmp_path / "notes.png"))
    with pytest.raises(GradvizError, match="does not exist"):
        read_image(str(tmp_path / "missing.png"))
