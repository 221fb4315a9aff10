"""spoolproxy.proxy"""
