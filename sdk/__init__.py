"""halfmq Python SDK: HTTP clients for the halfmq transactional message broker.

Blocking classes (thread-safe unless noted)::

    from sdk import (Client, Producer, Consumer, Message, TransactionProducer,
                     TransactionListener, LocalTransactionState, TransactionalProducer)

Asyncio twins: :class:`AsyncClient`, :class:`AsyncProducer`,
:class:`AsyncTransactionalProducer`, :class:`AsyncConsumer`. Every broker error is
a :class:`HalfmqError` subclass carrying ``code``, ``message`` and ``status``.
The SDK speaks HTTP only (httpx) and never imports broker code.
"""

from sdk._http import NO_RETRY, RetryPolicy
from sdk._txn_state import TransactionState
from sdk.aio import (
    AsyncClient,
    AsyncConsumer,
    AsyncProducer,
    AsyncTransactionalProducer,
)
from sdk.client import Client
from sdk.consumer import Consumer
from sdk.errors import (
    ERRORS_BY_CODE,
    AlreadyResolvedError,
    ArrowUnavailableError,
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
    ReservedTopicError,
    StorageUnavailableError,
    TooManyRequestsError,
    TopicExistsError,
    TopicNotFoundError,
    TransactionNotFoundError,
    UnknownProducerIdError,
    ValidationError,
)
from sdk.message import Message
from sdk.models import (
    CommittedOffset,
    FetchResult,
    HalfMessageInfo,
    PartitionInfo,
    ProducerIdentity,
    TopicMetadata,
    TransactionInfo,
)
from sdk.producer import Producer
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
    "AlreadyResolvedError",
    "ArrowUnavailableError",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
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
    "ReservedTopicError",
    "RetryPolicy",
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
    "ValidationError",
]
