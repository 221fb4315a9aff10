"""spoolproxy.replayer"""
