"""halfmq Python SDK: HTTP clients for the halfmq transactional message broker.

Blocking classes (thread-safe unless noted)::

    from sdk import (Client, Producer, Consumer, Message, TransactionProducer,
                     TransactionListener, LocalTransactionState, TransactionalProducer)

Share groups (queue consumption, per-message acks): :class:`ShareConsumer`.

Asyncio twins: :class:`AsyncClient`, :class:`AsyncProducer`,
:class:`AsyncTransactionalProducer`, :class:`AsyncConsumer`, :class:`AsyncShareConsumer`. Every broker error is
a :class:`HalfmqError` subclass carrying ``code``, ``message`` and ``status``.
The SDK speaks HTTP only (httpx) and never imports broker code.
"""

from sdk._http import NO_RETRY, RetryPolicy
from sdk._txn_state import TransactionState
from sdk.aio import (
    AsyncClient,
    AsyncConsumer,
    AsyncProducer,
    AsyncShareConsumer,
    AsyncTransactionalProducer,
)
from sdk.client import Client
from sdk.consumer import Consumer
from sdk.errors import (
    ERRORS_BY_CODE,
    AlreadyResolvedError,
    BrokerUnavailableError,
    ConcurrentTransactionsError,
    HalfMessageNotFoundError,
    HalfmqError,
    IllegalStateError,
    InternalError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ListenerNotFoundError,
    MessageTooLargeError,
    MethodNotAllowedError,
    NotFoundError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PartitionNotFoundError,
    ProducerFencedError,
    ReceiptExpiredError,
    ReservedTopicError,
    ShareGroupNotFoundError,
    StorageUnavailableError,
    TooManyRequestsError,
    TopicExistsError,
    TopicNotFoundError,
    TransactionNotFoundError,
    UnknownProducerIdError,
    UnknownReceiptError,
    ValidationError,
)
from sdk.message import Message
from sdk.models import (
    AckResult,
    CommittedOffset,
    FetchResult,
    HalfMessageInfo,
    PartitionInfo,
    ProducerIdentity,
    ReceivedMessage,
    ShareGroupInfo,
    ShareTopicInfo,
    TopicMetadata,
    TransactionInfo,
)
from sdk.producer import Producer
from sdk.share_consumer import ShareConsumer
from sdk.transaction_listener import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
)
from sdk.transaction_producer import TransactionProducer
from sdk.transactional import TransactionalProducer

__all__ = [
    "ERRORS_BY_CODE",
    "NO_RETRY",
    "AckResult",
    "AlreadyResolvedError",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
    "AsyncShareConsumer",
    "AsyncTransactionalProducer",
    "BrokerUnavailableError",
    "Client",
    "CommittedOffset",
    "ConcurrentTransactionsError",
    "Consumer",
    "FetchResult",
    "HalfMessageInfo",
    "HalfMessageNotFoundError",
    "HalfmqError",
    "IllegalStateError",
    "InternalError",
    "InvalidRequestError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "ListenerNotFoundError",
    "LocalTransactionState",
    "Message",
    "MessageTooLargeError",
    "MethodNotAllowedError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionInfo",
    "PartitionNotFoundError",
    "Producer",
    "ProducerFencedError",
    "ProducerIdentity",
    "ReceiptExpiredError",
    "ReceivedMessage",
    "ReservedTopicError",
    "RetryPolicy",
    "ShareConsumer",
    "ShareGroupInfo",
    "ShareGroupNotFoundError",
    "ShareTopicInfo",
    "StorageUnavailableError",
    "TooManyRequestsError",
    "TopicExistsError",
    "TopicMetadata",
    "TopicNotFoundError",
    "TransactionInfo",
    "TransactionListener",
    "TransactionNotFoundError",
    "TransactionProducer",
    "TransactionSendResult",
    "TransactionState",
    "TransactionalProducer",
    "UnknownProducerIdError",
    "UnknownReceiptError",
    "ValidationError",
]
