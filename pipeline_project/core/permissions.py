from rest_framework.permissions import BasePermission

from pipeline_project.core.models import ApiToken


class IsDaemonOrStaff(BasePermission):
    """A valid bearer token, or a staff member's browser session."""

    message = "Staff access or an API token is required."

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, ApiToken):
            return True
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
