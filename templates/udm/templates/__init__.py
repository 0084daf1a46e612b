"""Project templates for ``udm-cli new`` (cookiecutter), shipped as package data."""
