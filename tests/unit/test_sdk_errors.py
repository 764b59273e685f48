"""One SDK error class per broker error code, with the same status."""

from __future__ import annotations

import inspect
import pickle

import pytest

import sdk
from half_store.domain import errors as broker_errors
from sdk.errors import ERRORS_BY_CODE, HalfmqError, error_from_response


def _broker_error_classes() -> list[type[broker_errors.BrokerError]]:
    return [
        cls
        for _, cls in inspect.getmembers(broker_errors, inspect.isclass)
        if issubclass(cls, broker_errors.BrokerError) and cls is not broker_errors.BrokerError
    ]


@pytest.mark.parametrize("broker_cls", _broker_error_classes(), ids=lambda c: c.code)
def test_every_broker_code_has_an_sdk_class_with_the_same_status(broker_cls: type[broker_errors.BrokerError]) -> None:
    sdk_cls = ERRORS_BY_CODE.get(broker_cls.code)
    assert sdk_cls is not None, f"sdk.errors has no class for {broker_cls.code}"
    assert sdk_cls.status == broker_cls.status
    assert getattr(sdk, sdk_cls.__name__) is sdk_cls  # exported from the package


def test_error_from_response_builds_the_typed_error() -> None:
    body = {"error": {"code": "PRODUCER_FENCED", "message": "epoch 1 is fenced by epoch 2"}}
    error = error_from_response(409, body)
    assert isinstance(error, sdk.ProducerFencedError)
    assert (error.code, error.status, error.message) == ("PRODUCER_FENCED", 409, "epoch 1 is fenced by epoch 2")
    assert "PRODUCER_FENCED" in str(error)


def test_unknown_code_maps_to_the_base_class_and_keeps_the_code() -> None:
    error = error_from_response(418, {"error": {"code": "TEAPOT", "message": "short and stout"}})
    assert type(error) is HalfmqError
    assert (error.code, error.status, error.message) == ("TEAPOT", 418, "short and stout")


def test_non_json_error_body_still_gives_a_halfmq_error() -> None:
    error = error_from_response(502, None, "<html>Bad Gateway</html>")
    assert type(error) is HalfmqError
    assert error.code == "HTTP_502" and error.status == 502 and "Bad Gateway" in error.message


def test_errors_survive_pickling() -> None:
    error = error_from_response(404, {"error": {"code": "TOPIC_NOT_FOUND", "message": "no such topic: x"}})
    clone = pickle.loads(pickle.dumps(error))
    assert isinstance(clone, sdk.TopicNotFoundError)
    assert (clone.code, clone.status, clone.message) == (error.code, error.status, error.message)


def test_every_public_name_has_a_docstring() -> None:
    for name in sdk.__all__:
        obj = getattr(sdk, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, f"sdk.{name} has no docstring"
            for attr_name, attr in vars(obj).items():
                if not attr_name.startswith("_") and (inspect.isfunction(attr) or isinstance(attr, property)):
                    assert attr.__doc__, f"sdk.{name}.{attr_name} has no docstring"
