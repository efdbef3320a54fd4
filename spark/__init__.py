"""rmqspec.spark — PySpark audit jobs over traces."""
