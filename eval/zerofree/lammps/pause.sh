#!/bin/sh
touch ready
read x < go
