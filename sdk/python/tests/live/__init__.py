"""Tests against a real daemon; test_live.py runs them all in one DaemonSuite."""
