"""halfmq's broker: HTTP, RocketMQ and Kafka fronts over one transactional log."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source for the version: pyproject.toml, as installed. OpenAPI, the console and the CLI show it.
    __version__ = version("halfmq")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
