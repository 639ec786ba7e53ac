"""Force laws: the vectorized physics of force elements (see :class:`ForceLaw`)."""

from mbvi.forcelaws.base import ForceLaw

__all__ = ["ForceLaw"]
