"""rcubench web application (Django project)."""
