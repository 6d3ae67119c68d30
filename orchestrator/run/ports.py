"""The controller's default ``/metrics`` port, in a module of its own so that the command
line's help can name it without loading the run machinery."""

#: The controller's ``/metrics`` port unless ``--metrics-port`` says otherwise. Prometheus'
#: registry of exporter ports fills 9100-9999, so any port there is some exporter's; this one is
#: outside it, outside surge's own brokers' ports (port_base 5680 and +10000, +10100, +20000,
#: +30000 from it; MQ 1414 and its exporters from 9157), RabbitMQ's (4369, 5672, 15672, 15692,
#: 25672), Spark's (4040, 7077, 8080) and Prometheus' own (9090-9094), and below Linux' ephemeral
#: range (32768-60999), so the kernel never hands it to some client as a random local port.
DEFAULT_METRICS_PORT = 19420
