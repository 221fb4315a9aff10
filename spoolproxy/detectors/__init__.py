"""spoolproxy.detectors"""
