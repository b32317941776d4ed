"""textgrid: plain-text tables."""

from textgrid.cells import pad, to_text, truncate
from textgrid.width import display_width
from textgrid.render import STYLES, render
