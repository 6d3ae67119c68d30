"""IBM MQ topologies: uniform clusters of queue managers created with crtmqm -ii/-ic/-iv on SSH
hosts (document 000), and Native HA queue managers through the MQ operator (document 003)."""
