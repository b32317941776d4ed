"""iniconf: read, query and write INI files."""

from iniconf.config import Config, MissingOption, MissingSection
from iniconf.parser import ParseError, load, loads
from iniconf.writer import dumps
from iniconf.interpolate import InterpolationError
