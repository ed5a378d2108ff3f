from pipeline_project.core.checks import security_middleware_installed


def test_the_security_middleware_are_checked_by_class(settings):
    assert security_middleware_installed(None) == []

    settings.MIDDLEWARE = [
        path for path in settings.MIDDLEWARE if not path.endswith(("SecurityMiddleware", "CsrfViewMiddleware"))
    ]

    assert [message.id for message in security_middleware_installed(None)] == ["security.W001", "security.W003"]


def test_django_s_own_classes_pass_too(settings):
    settings.MIDDLEWARE = [
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
    ]

    assert security_middleware_installed(None) == []
