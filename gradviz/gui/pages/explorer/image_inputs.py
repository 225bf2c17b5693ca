"""An image file as explorer inputs: read with Qt's QImage (PNG, JPEG and the other formats
Qt reads, no other dependency), as one sample (1, C, H, W) float64 in [0, 1]."""

from __future__ import annotations

import os

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from gradviz.core.common.errors import GradvizError

IMAGE_FILES = "Images (*.png *.jpg *.jpeg *.bmp);;All files (*)"
#: The most pixels read from an image file (a 2048 x 2048 picture).
MAX_PIXELS = 2048 * 2048


def read_image(path: str, in_shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The image at ``path`` as (1, C, H, W) float64 in [0, 1].

    Where the model declares its samples as (C, H, W) with C = 1 or 3, the image is scaled
    to H x W and converted to grey or RGB to match; otherwise it keeps its size, grey (C = 1)
    for a greyscale file and RGB (C = 3) for any other. GradvizError when the file cannot be
    read as an image or is too big."""
    if not path:
        raise GradvizError("Choose an image file (PNG or JPEG) first.")
    image = QImage(path)
    if image.isNull():
        where = "does not exist" if not os.path.exists(path) else "is not an image Qt can read"
        raise GradvizError(f"{path} {where}; choose a PNG or JPEG file.")
    if image.width() * image.height() > MAX_PIXELS:
        raise GradvizError(
            f"{path} has {image.width()} x {image.height()} pixels; the explorer reads images "
            f"of up to {MAX_PIXELS:,} pixels: scale it down first."
        )
    channels = 1 if image.isGrayscale() else 3
    if in_shape is not None and len(in_shape) == 3 and in_shape[0] in (1, 3):
        channels, height, width = in_shape
        if (image.height(), image.width()) != (height, width):
            image = image.scaled(
                width,
                height,
                Qt.AspectRatioMode.IgnoreAspectRatio,
                Qt.TransformationMode.SmoothTransformation,
            )
    return _pixels(image, channels)[None].astype(np.float64) / 255.0


def _pixels(image: QImage, channels: int) -> np.ndarray:
    """(C, H, W) uint8 pixels of ``image`` as grey (C = 1) or RGB (C = 3)."""
    fmt = QImage.Format.Format_Grayscale8 if channels == 1 else QImage.Format.Format_RGB888
    image = image.convertToFormat(fmt)
    height, width = image.height(), image.width()
    row = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())
    rows = row.reshape(height, image.bytesPerLine())[:, : width * channels]
    return rows.reshape(height, width, channels).transpose(2, 0, 1).copy()
