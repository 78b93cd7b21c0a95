# Shortcuts for the commands the README documents.
.PHONY: test soak

# test runs the README's test command.
test:
	go test ./...

# soak kills the service pipelines (NATS -> file, Kafka -> Kafka, Kafka ->
# PostgreSQL) with SIGKILL until KILLS kills landed and prints the lost,
# duplicated and partial counts per scenario. Needs PostgreSQL and NATS on
# 127.0.0.1 (Kafka runs in process on kfake).
KILLS ?= 1000
soak:
	go test ./internal/e2e -run '^TestSoak$$' -soak=$(KILLS) -timeout 6h -v -count=1
