"""The configurations shipped with mmcurate, as package data (``mmcurate.configs``), so an
installed copy finds them without a checkout: ``core.config.bundled_config(name)``."""
