from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.accounts import views

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password/", views.PasswordChange.as_view(), name="password-change"),
    path("tokens/", views.tokens, name="api-tokens"),
    path("tokens/revoke-all/", views.revoke_all, name="api-token-revoke-all"),
    path("tokens/<slug:token_key>/revoke/", views.revoke_token, name="api-token-revoke"),
]
