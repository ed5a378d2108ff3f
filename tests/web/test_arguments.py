"""Arguments' secrets: which keys are secret, how their values are masked (at any depth, whatever
they are), who may view them (a token with the write scope, a staff member with the permission),
and which searches are refused to those who may not."""

from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Permission
from django.test import RequestFactory

from pipeline_project.api.authentication import TokenPrincipal
from pipeline_project.core import services as core_services
from pipeline_project.web.arguments import (
    MASK,
    arguments_masked,
    arguments_shown,
    is_secret_key,
    may_view_arguments,
    search_refusal,
    secret_keys_in,
    secret_values,
    text_without_secrets,
)
from tests.conftest import ALL_DATABASES

# --- the masking rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "DB_PASSWORD",
        "db-password",
        "dbPassword",
        "api_key",
        "apiKey",
        "X-API-Key",
    ],
)
def test_a_key_containing_a_secret_name_in_any_case_or_separator_is_secret(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["source_id", "page", "pass", "user", "", 7, None])
def test_other_keys_are_not_secret(key):
    assert not is_secret_key(key)


def test_values_of_secret_keys_are_masked_at_any_depth_in_objects_and_lists():
    args = {
        "source_id": 7,
        "password": "hunter2",
        "db": {"host": "db", "DB_PASSWORD": "s3cret", "options": [{"token": "t"}, {"page": 2}]},
        "targets": [{"api-key": "k", "name": "a"}, "plain", 3],
    }

    assert arguments_masked(args) == {
        "source_id": 7,
        "password": MASK,
        "db": {"host": "db", "DB_PASSWORD": MASK, "options": [{"token": MASK}, {"page": 2}]},
        "targets": [{"api-key": MASK, "name": "a"}, "plain", 3],
    }
    assert args["password"] == "hunter2" and args["db"]["options"][0]["token"] == "t"  # a copy: stored data stays


def test_a_secret_value_is_masked_whole_whatever_its_type_or_length():
    args = {"secret": {"nested": "x" * 50}, "token": None, "api_key": 12345, "credentials": ["a", "b"], "pw": ""}

    masked = arguments_masked(args)

    assert [masked[key] for key in ("secret", "token", "api_key", "credentials")] == [MASK] * 4
    assert masked["pw"] == ""  # not a secret name


@pytest.mark.parametrize("value", [None, 7, "password", [1, "token"], [], {}])
def test_values_without_secret_keys_are_left_as_they_are(value):
    assert arguments_masked(value) == value


def test_the_setting_names_the_secret_keys(settings):
    settings.SECRET_ARG_KEYS = ["pin", "Session-ID"]

    assert arguments_masked({"pin": 1, "session_id": 2, "password": 3}) == {
        "pin": MASK,
        "session_id": MASK,
        "password": 3,
    }


def test_secret_keys_named_by_a_query_are_found_at_any_depth():
    assert secret_keys_in({"db": [{"Password": "x"}], "token": 1, "page": 2}) == ["token", "Password"]
    assert secret_keys_in({"source_id": 7, "password_hint": None} | {"x": ["password"]}) == ["password_hint"]
    assert secret_keys_in(["token"]) == [] and secret_keys_in("token") == []


# --- who may view them ------------------------------------------------------------------------


def staff(*, permission=False, superuser=False, active=True):
    user = get_user_model().objects.create_user(
        f"u{get_user_model().objects.count()}", is_staff=True, is_superuser=superuser, is_active=active
    )
    if permission:
        user.user_permissions.add(Permission.objects.get(codename="view_job_arguments"))
    return user


def session(user):
    request = RequestFactory().get("/")
    request.user = user
    return request


def token_request(*scopes):
    token, _key = core_services.api_token_create(name="daemon", scopes=list(scopes))
    return SimpleNamespace(auth=token, user=TokenPrincipal(token))


@ALL_DATABASES
def test_staff_see_arguments_unmasked_only_with_the_permission_superusers_always():
    assert may_view_arguments(session(staff(permission=True)))
    assert may_view_arguments(session(staff(superuser=True)))
    assert not may_view_arguments(session(staff()))
    assert not may_view_arguments(session(staff(permission=True, active=False)))
    assert not may_view_arguments(session(AnonymousUser()))
    assert not may_view_arguments(None)


@ALL_DATABASES
def test_a_token_sees_arguments_unmasked_only_with_the_write_scope():
    assert may_view_arguments(token_request("write"))
    assert may_view_arguments(token_request("read", "write", "operate"))
    assert not may_view_arguments(token_request("read"))
    assert not may_view_arguments(token_request("read", "operate"))


@ALL_DATABASES
def test_arguments_are_shown_as_the_caller_may_see_them():
    args = {"password": "hunter2", "page": 1}

    assert arguments_shown(args, request=session(staff(permission=True))) == args
    assert arguments_shown(args, request=token_request("read")) == {"password": MASK, "page": 1}


@ALL_DATABASES
def test_a_search_naming_a_secret_key_is_refused_to_a_caller_who_may_not_view_arguments():
    wanted = {"db": {"db_password": "guess"}}

    refusal = search_refusal(wanted, request=session(staff()))

    assert refusal and "db_password" in refusal
    assert search_refusal(wanted, request=session(staff(permission=True))) is None
    assert search_refusal(wanted, request=token_request("write")) is None
    assert search_refusal({"source_id": 7}, request=token_request("read")) is None


def test_the_secret_values_of_args_are_found_at_any_depth_and_taken_out_of_a_text():
    args = {"password": "hunter2", "nested": [{"api_key": {"a": "k-123456", "n": 12345}}], "token": "ab", "name": "x"}

    found = secret_values(args)

    assert found == {"hunter2", "k-123456", "12345"}  # "ab": too short to look for
    assert text_without_secrets("hunter2 then k-123456, x", found) == f"{MASK} then {MASK}, x"
