"""Where mam's MQTT broker is: a configured one, or the workspace's embedded amqtt broker."""
