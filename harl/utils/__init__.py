"""HARL's ``harl.utils`` names that HARL users' scripts import (``configs_tools``)."""
