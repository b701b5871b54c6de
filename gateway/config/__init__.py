"""The configuration: ``config.yaml`` (and ``.env``) parsed once into frozen dataclasses.

:mod:`gateway.config.schema` holds the keys, their defaults and the checks across keys;
:mod:`gateway.config.typed_yaml` the machinery that turns YAML into typed dataclasses
and reports every problem at once with its file and line.
"""

from gateway.config.schema import Config, ConfigError, load_config, parse_config

__all__ = ["Config", "ConfigError", "load_config", "parse_config"]
