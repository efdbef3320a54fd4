"""rmqspec.traces — trace schema, recorders, readers/writers, generators, converters."""
