"""The Kafka protocol front: a listener in the broker translating Kafka requests into service calls (docs/kafka.md)."""
