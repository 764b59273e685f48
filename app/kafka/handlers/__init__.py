"""One module per group of Kafka APIs; importing this package registers them all."""

from app.kafka.handlers import (  # noqa: F401 - imported to register their APIs
    cluster,
    consumer_groups,
    fetch,
    groups,
    produce,
    sasl,
    topics,
    transactions,
)
