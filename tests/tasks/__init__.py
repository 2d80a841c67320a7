"""Tests of app/tasks: the task registry and the tasks it serves."""
