"""A package whose only content is one harl stage kind."""
